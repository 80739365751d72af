// fuzz-modules: InternalCollectionsUtilities OrderedCollections BinaryCoding SwiftProtobuf GoProCodec
// GoPro assembler fuzz target (spec gopro.md §3). Input: packets as [length][bytes] records.
// Every packet is accepted or rejected with a GoProError, never a crash; a completed message
// is never longer than 65535 bytes; and the input bytes themselves survive packetize → reassemble.
import GoProCodec

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var assembler = GoProAssembler()
    var i = 0
    while i < bytes.count {
        let n = Int(bytes[i])
        let packet = Array(bytes[(i + 1)..<min(i + 1 + n, bytes.count)])
        i += 1 + n
        do {
            if let m = try assembler.append(packet), m.count > 65535 { fatalError("message longer than any header allows") }
        } catch {
            _ = error.description
        }
    }
    if bytes.count <= GoProPacketizer.maximumMessageLength {
        for style in [GoProContinuationStyle.flat, .counting] {
            guard let packets = try? GoProPacketizer.packetize(bytes, continuation: style) else {
                fatalError("packetize rejected a message within the limit")
            }
            var again = GoProAssembler()
            var out: [UInt8]? = nil
            for p in packets {
                do {
                    if let m = try again.append(p) { out = m }
                } catch {
                    fatalError("own packets rejected: \(error)")
                }
            }
            if out != bytes { fatalError("packetize → reassemble changed the message") }
        }
    }
    return 0
}
