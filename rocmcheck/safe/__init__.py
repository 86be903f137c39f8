"""The few places every command goes through for hostile input and output (docs/architecture.md, "Safety"):
files.py (the one capped reader and the one atomic writer), structured.py (JSON/YAML with limits on depth, aliases
and value types), text.py (the terminal sanitiser), scratch_folders.py (rocmcheck's temporary folders, named for
their process, and the removal of those whose process is gone). The redactor is rocmcheck/facts/redact.py and
the option types are rocmcheck/commands/options.py."""
