"""Running agents: `Agent`, `Run` (one `transition` plus one effect per step), the event
stream and its results, snapshots and the runner."""
