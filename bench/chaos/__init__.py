"""`make chaos`: reliability drills against real trainhub processes (see drills.py).

Kept under bench/, outside the pytest suite's collection: drills start servers and take minutes.
"""
