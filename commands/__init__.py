"""The command line: one subcommand per core verb, plus the auditor commands."""
