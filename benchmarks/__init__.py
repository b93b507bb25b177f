"""Reproducible comparisons of agents and learners: F1, EM, total and peak tokens."""
