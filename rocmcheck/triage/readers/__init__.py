"""Readers of what people paste into an issue thread (collect_env, ds_report, pip lists, tracebacks, `docker run`
lines, session logs, doctor summaries): pasted text -> partial facts, where a fact nobody pasted stays unknown. Only
triage reads pastes; the live doctor's tool-output parsers stay in rocmcheck/facts/parsers. None raises, whatever
the text."""
