/// Layout benchmarks (filled in with the codec).
func layoutBenchmarks() {}
