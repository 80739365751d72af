/// GoPro benchmarks (filled in with the codec).
func goproBenchmarks() {}
