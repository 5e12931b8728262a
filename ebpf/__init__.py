"""Kernel-level tenant prioritisation: a TC classifier (`tenant_tc.c`) loaded with bcc, an HTB
hierarchy built from the QoS classes of the tenants file, and a loader/CLI to attach, inspect, update
and detach them (`python -m ebpf.cli --help`). See `ebpf/README.md`.
"""
