import ArgumentParser
import BinaryCoding
import GoProCodec

/// `gatt2mqtt gopro …`: the Open GoPro codec from the command line (docs/gopro.md).
struct GoProCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gopro", abstract: "Open GoPro BLE messages.",
        subcommands: [Encode.self, Decode.self, Packetize.self, Reassemble.self])

    /// `gopro encode JSON` → `{"characteristic":"GP-00XX","message":"<hex>","packets":[…]}`.
    struct Encode: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Encode a JSON request into a message and its packets.")
        @Argument(help: "The request, e.g. {\"command\":\"set_shutter\",\"value\":true} (\"-\" or absent: stdin).")
        var json: String?

        func run() throws {
            let text = argumentOrStdin(json)
            let value: JSONValue
            do { value = try JSONValue(parsing: text) } catch { throw CLIError("request: \(error)") }
            let request = try GoProRequest(json: value)
            let packets = try request.packets()
            let out: JSONValue = [
                "characteristic": .string(request.characteristic.shortName),
                "message": .string(Hex.encode(request.message)),
                "packets": .array(packets.map { .string(Hex.encode($0)) }),
            ]
            emit(out.jsonText)
        }
    }

    /// `gopro decode --characteristic GP-00XX HEX…`: packets as received → one JSON line per message.
    struct Decode: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Reassemble notification packets and decode the message(s).")
        @Option(help: "The notify characteristic the packets arrived on (GP-0073, GP-0075, GP-0077, GP-0092).")
        var characteristic: String
        @Argument(help: "The packets in hex, in arrival order (absent: whitespace-separated on stdin).")
        var packets: [String] = []

        func run() throws {
            let c = try GoProCharacteristic(identifier: characteristic)
            guard c.isNotify else { throw CLIError("--characteristic \(c.shortName) is a write characteristic; use its notify pair \(c.responseCharacteristic.shortName)") }
            for message in try reassemble(packets) {
                emit(try GoProResponse(decoding: message, on: c).json.jsonText)
            }
        }
    }

    /// `gopro packetize HEX` → packets, one hex per line.
    struct Packetize: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Split a message into 20-byte packets.")
        @Argument(help: "The message in hex (\"-\" or absent: stdin).")
        var hex: String?
        @Flag(help: "Use the general 5-bit start header (messages up to 31 bytes) instead of extended-13.")
        var general = false
        @Flag(help: "Number continuation headers 0x80…0x8F instead of writing 0x80 throughout.")
        var counting = false

        func run() throws {
            let message = try decodeHex(argumentOrStdin(hex), what: "message")
            let packets = try GoProPacketizer.packetize(
                message, startHeader: general ? .general : .extended13, continuation: counting ? .counting : .flat)
            for p in packets { emit(Hex.encode(p)) }
        }
    }

    /// `gopro reassemble HEX…` → the message hex.
    struct Reassemble: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Reassemble packets into the message(s), one hex per line.")
        @Argument(help: "The packets in hex, in arrival order (absent: whitespace-separated on stdin).")
        var packets: [String] = []

        func run() throws {
            for message in try reassemble(packets) { emit(Hex.encode(message)) }
        }
    }
}

private func decodeHex(_ text: String, what: String) throws -> [UInt8] {
    do { return try Hex.decode(text) } catch { throw CLIError("\(what): \(error)") }
}

/// Feeds packets to one assembler; every message must be complete at the end.
private func reassemble(_ arguments: [String]) throws -> [[UInt8]] {
    let texts = arguments.isEmpty
        ? argumentOrStdin(nil).split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }).map(String.init)
        : arguments
    guard !texts.isEmpty else { throw CLIError("no packets given") }
    var assembler = GoProAssembler()
    var messages = [[UInt8]]()
    for (i, text) in texts.enumerated() {
        let packet = try decodeHex(text, what: "packet \(i + 1)")
        do {
            if let m = try assembler.append(packet) { messages.append(m) }
        } catch {
            throw CLIError("packet \(i + 1): \(error)")
        }
    }
    guard assembler.isIdle else {
        throw CLIError("incomplete message: \(assembler.missingBytes) byte(s) missing after packet \(texts.count)")
    }
    return messages
}
