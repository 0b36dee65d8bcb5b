"""Stores that read from a hot standby: tests against a primary and a standby of their own."""
