import GoProCodec

/// A Get-All-Statuses style reply (spec gopro.md §12): 370-byte message, extended-13 start
/// `21 72`, camera-style counting continuations → 20 packets, 391 bytes on the air.
private func statusResponsePackets() -> (message: [UInt8], packets: [[UInt8]]) {
    var message: [UInt8] = [0x13, 0x00]
    for status in GoProStatus.all where message.count < 340 {
        switch status.type {
        case .bool, .enumeration: message += [status.id, 1, 1]
        case .integer: message += [status.id, 4, 0, 0, 0x01, 0xF4]
        case .string: message += [status.id, 4, 0x47, 0x50, 0x32, 0x34]
        }
    }
    let pad = 370 - message.count - 2  // undocumented status 40 carries a string (§11)
    message += [40, UInt8(pad)] + [UInt8](repeating: 0x41, count: pad)
    let packets = try! GoProPacketizer.packetize(message, continuation: .counting).arrays
    precondition(message.count == 370 && packets.count == 20 && packets.reduce(0) { $0 + $1.count } == 391)
    return (message, packets)
}

/// GoPro benchmarks: reassembly + decode of a status reply, packetizing.
func goproBenchmarks() {
    let (_, packets) = statusResponsePackets()
    bench("GoPro reassemble+decode status 391B/20 packets") {
        var assembler = GoProAssembler()
        for p in packets {
            if let m = try! assembler.append(p) { blackHole(try! GoProResponse(decoding: m, on: .queryResponse)) }
        }
    }
    bench("GoPro reassemble+decode+named values (JSON)") {
        var assembler = GoProAssembler()
        for p in packets {
            if let m = try! assembler.append(p) { blackHole(try! GoProResponse(decoding: m, on: .queryResponse).json) }
        }
    }
    bench("GoPro reassemble+decode+namedEntries") {
        var assembler = GoProAssembler()
        for p in packets {
            if let m = try! assembler.append(p), case let .query(q) = try! GoProResponse(decoding: m, on: .queryResponse) {
                blackHole(q.namedEntries)
            }
        }
    }
    let thousand = (0..<1000).map { UInt8(truncatingIfNeeded: $0) }
    bench("GoPro packetize 1000 bytes") {
        blackHole(try! GoProPacketizer.packetize(thousand))
    }
    let shutter = GoProRequest.command(.setShutter, parameters: [[1]])
    bench("GoPro encode set_shutter request + packets") {
        blackHole(try! shutter.packets())
    }
}
