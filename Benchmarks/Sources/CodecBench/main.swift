// codec-bench: throughput and allocations of the pure codecs (see docs/benchmarks.md).
//   swift run -c release --package-path Benchmarks codec-bench [name-filter]
import Foundation
print("codec-bench (\(ProcessInfo.processInfo.processorCount) cores)")
capsBenchmarks()
goproBenchmarks()
layoutBenchmarks()
jsonBenchmarks()
advertisementBenchmarks()
passiveBenchmarks()
