"""Leaf utilities every package may use (no rmqd imports above this package)."""
