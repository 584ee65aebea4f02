"""The command line: `graphfix list|check|fix|verify|demo` (`main`), its text, JSON and SARIF
output (`sarif`), and the demo of the seed bugs (`demo`).

May import every other part of graphfix; nothing imports it but `graphfix.__main__`.
"""
