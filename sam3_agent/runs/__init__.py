"""Runs of many jobs: the jobs layer (store, engines), batch inference and evaluation."""
