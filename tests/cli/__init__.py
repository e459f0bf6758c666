"""Offline tests of the `trainhub` command-line client."""

#: The example CustomJobSpec from the CLI brief; it must work verbatim (workerPoolSpecs is a mapping).
SEED_CONFIG = """\
workerPoolSpecs:
  machineSpec:
    machineType: a2-highgpu-1g
    acceleratorType: NVIDIA_TESLA_A100
    acceleratorCount: 1
  replicaCount: 1
  containerSpec:
    imageUri: gcr.io/ucaip-test/ucaip-training-test
    args:
    - port=8500
    command:
    - start
scheduling:
  strategy: FLEX_START
  maxWaitDuration: 7200s
"""
