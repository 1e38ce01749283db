"""The race: ssdcheck's cuTile forward against TileGym and mamba_ssm on one GPU (see lab/bench/README.md)."""
