"""Test doubles, fixtures and subprocess drivers shared by every layer's tests."""
