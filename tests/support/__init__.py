"""Test support: a scripted OpenAI-compatible server, offline data-file writers, CLI helpers."""
