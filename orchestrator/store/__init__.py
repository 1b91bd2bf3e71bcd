"""What a run keeps on disk: episode files, telemetry, event logs, demonstrations, records."""
