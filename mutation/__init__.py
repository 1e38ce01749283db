"""Mutation testing of the property suite: realistic kernel bugs as data, and a runner that scores the suite."""
