"""Reports: the console table (rich) and the versioned JSON document."""
