"""What a run is: its spec, overrides, the BALROG worker config and episode seeds."""
