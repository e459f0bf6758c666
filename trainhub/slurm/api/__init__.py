"""REST under /v1/projects/{project}/locations/{location}/slurmClusters, one module per resource."""
