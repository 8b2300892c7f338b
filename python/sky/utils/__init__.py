"""Helpers of the sky package that belong to no single public module."""
