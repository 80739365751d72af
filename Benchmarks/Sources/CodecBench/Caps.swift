/// Caps benchmarks (filled in with the codec).
func capsBenchmarks() {}
