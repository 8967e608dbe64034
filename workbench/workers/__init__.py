"""Worker hosts and what runs on them: hosts, devices, heartbeats and liveness, the boot id, device
probing, and starting child processes. Every app above it (datasets, runs, inference) uses it;
it imports none of them, and hears of their periodic work only through its signals."""
