import BinaryCoding
import GattLayout

/// Layout benchmarks: the heart-rate measurement (0x2A37) with two RR intervals, both directions.
func layoutBenchmarks() {
    guard let layout = try? GattLayout.builtin(named: "heart_rate_measurement") else {
        print("layout: heart_rate_measurement does not parse")
        return
    }
    // Flags 0x16 (contact supported + detected, RR present), 75 bpm, RR 800/1024 s and 816/1024 s.
    let bytes: [UInt8] = [0x16, 0x4B, 0x20, 0x03, 0x30, 0x03]
    guard let value = try? layout.decode(bytes), (try? layout.encode(value)) == bytes else {
        print("layout: heart-rate round trip failed")
        return
    }
    bench("Layout decode heart_rate_measurement (2 RR)") {
        blackHole(try? layout.decode(bytes))
    }
    bench("Layout encode heart_rate_measurement (2 RR)") {
        blackHole(try? layout.encode(value))
    }
    bench("Layout parse heart_rate_measurement definition") {
        blackHole(try? GattLayout.builtin(named: "heart_rate_measurement"))
    }
}
