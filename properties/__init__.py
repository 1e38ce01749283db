"""Invariants of the SSD forward, each a reusable function (implementation, problem) -> result.

Import direction: tests -> properties -> oracles. Properties take an implementation's KernelInfo
(or any callable with the contract) and a drawn SSDProblem, and never import tests.
"""
