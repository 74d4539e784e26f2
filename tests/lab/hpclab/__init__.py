"""The hpc.balance local lab as one package: netns hosts and real-kernel guests on one bridge (see ../README.md).

tests/lab/lab.py is its command line; tests/lab/test_lab.py its tests.
"""
