import CapsCodec

/// Caps benchmarks: encode/decode of the CXR brightness request (spec rokid-caps.md §3.6) and
/// of a 4 KiB binary member; plus the whole command path (JSON command → packet bytes).
func capsBenchmarks() {
    let brightness: Caps = [
        .uint32(0x1001), .uint32(1), .string("Dev"), .object([.string("Dev_GlassBrightness"), .uint32(8)]),
    ]
    let brightnessBytes = try! brightness.encoded()
    precondition(brightnessBytes.count == 46)
    var blob = [UInt8](repeating: 0, count: 4096)
    for i in blob.indices { blob[i] = UInt8(truncatingIfNeeded: i &* 31) }
    let binary: Caps = [.binary(blob)]
    let binaryBytes = try! binary.encoded()

    bench("Caps encode brightness request (46 B)") {
        blackHole(try! brightness.encoded())
    }
    bench("Caps decode brightness request (46 B)") {
        blackHole(try! Caps(decoding: brightnessBytes))
    }
    bench("Caps encode 4 KiB binary member") {
        blackHole(try! binary.encoded())
    }
    bench("Caps decode 4 KiB binary member") {
        blackHole(try! Caps(decoding: binaryBytes))
    }
    bench("Caps CXR build+encode set_brightness") {
        blackHole(try! CXRCommand.setBrightness(8).encoded(requestID: 1))
    }
    bench("Caps CXR decode brightness packet") {
        blackHole(try! CXRPacket(decoding: brightnessBytes))
    }
    var stream = brightnessBytes
    for _ in 0..<9 { stream += brightnessBytes }
    bench("Caps stream reader, 10 packets in 20-byte chunks") {
        var reader = CapsStreamReader()
        var n = 0
        var i = 0
        while i < stream.count {
            let end = min(i + 20, stream.count)
            reader.append(stream[i..<end])
            while let c = try! reader.next() { n += c.count }
            i = end
        }
        blackHole(n)
    }
}
