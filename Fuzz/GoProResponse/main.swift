// fuzz-modules: InternalCollectionsUtilities OrderedCollections BinaryCoding SwiftProtobuf GoProCodec
// GoPro response decoder fuzz target (spec gopro.md §4.4, incl. protobuf via SwiftProtobuf).
// Input: byte 0 picks the notify characteristic (GP-0073, GP-0075, GP-0077, GP-0092); the rest
// is one message. It decodes or throws GoProError; what decodes renders to JSON that parses back.
// The same bytes are also fed as packets ([length][bytes] records) through an assembler.
import BinaryCoding
import GoProCodec

private let characteristics: [GoProCharacteristic] = [.commandResponse, .settingsResponse, .queryResponse, .networkManagementResponse]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let c = characteristics[Int(bytes[0]) % characteristics.count]
    check(Array(bytes.dropFirst()), c)
    var assembler = GoProAssembler()
    var i = 1
    while i < bytes.count {
        let n = Int(bytes[i])
        let packet = Array(bytes[(i + 1)..<min(i + 1 + n, bytes.count)])
        i += 1 + n
        if let m = try? assembler.append(packet) { check(m, c) }
    }
    return 0
}

private func check(_ message: [UInt8], _ c: GoProCharacteristic) {
    do {
        let response = try GoProResponse(decoding: message, on: c)
        let text = response.json.jsonText
        guard (try? JSONValue(parsing: text)) != nil else { fatalError("response JSON does not parse: \(text)") }
        _ = response.identifier
        _ = response.isAsynchronous
        if case let .query(q) = response {
            var end = 2
            for e in q.entries {
                if e.offset != end + 2 { fatalError("entries are not contiguous") }
                end = e.offset + e.length
            }
            if end != message.count { fatalError("entries do not cover the message") }
        }
    } catch {
        _ = error.description
    }
}
