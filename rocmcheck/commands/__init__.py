"""One module per CLI command; each only parses options and calls one function."""
