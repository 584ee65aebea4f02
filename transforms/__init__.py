"""Built-in graphfix transforms: one module per bug, each with its graph rewrite and codemod."""
