"""Reports a person opens: the self-contained HTML page (`graphfix report`)."""
