from turnback.cli import entry

raise SystemExit(entry())
