import ArgumentParser
import BinaryCoding
import CapsCodec

/// `gatt2mqtt caps`: Rokid Caps v5 objects and CXR packets (docs/caps.md).
struct CapsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "caps",
        abstract: "Rokid Caps and CXR packets.",
        subcommands: [Encode.self, Decode.self, Split.self, CXR.self, CXRDecode.self]
    )

    struct Encode: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Caps JSON (typed or loose member array) → lowercase hex.")
        @Argument(help: "The JSON member array; read from standard input when absent or '-'.")
        var json: String?

        func run() throws {
            let caps = try Caps(jsonText: argumentOrStdin(json))
            emit(Hex.encode(try caps.encoded()))
        }
    }

    struct Decode: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Hex of one whole Caps object → canonical typed JSON.")
        @Argument(help: "The object's bytes in hex; standard input when absent or '-'.")
        var hex: String?

        func run() throws {
            let bytes = try Hex.decode(argumentOrStdin(hex))
            emit(try Caps(decoding: bytes).typedJSON.jsonText)
        }
    }

    struct Split: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stream reassembly: stdin one hex chunk per line → one canonical JSON line per complete object.")
        @Option(help: "Largest accepted object in bytes.")
        var maxSize: Int = Caps.defaultSizeLimit

        func run() throws {
            guard maxSize > 5 else { throw CLIError("--max-size must be at least 6, got \(maxSize)") }
            var reader = CapsStreamReader(sizeLimit: maxSize)
            var lineNumber = 0
            while let line = readLine(strippingNewline: true) {
                lineNumber += 1
                let chunk: [UInt8]
                do { chunk = try Hex.decode(line) } catch { throw CLIError("line \(lineNumber): \(error)") }
                do {
                    for caps in try reader.feed(chunk) { emit(caps.typedJSON.jsonText) }
                    if let failure = reader.failure { throw failure }
                } catch {
                    throw CLIError("line \(lineNumber): \(error)")
                }
            }
            if reader.bufferedByteCount > 0 {
                throw CLIError(
                    "end of input inside an object: \(reader.bufferedByteCount) byte(s) at stream offset \(reader.offset) never completed")
            }
        }
    }

    struct CXR: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "cxr", abstract: "A CXR command as JSON → hex of its REQUEST packet.")
        @Argument(help: "The command, e.g. {\"command\":\"set_brightness\",\"value\":8}; standard input when absent or '-'.")
        var json: String?
        @Option(help: "The request id (uint32).")
        var requestId: UInt32 = 1

        func run() throws {
            let command = try CXRCommand(jsonText: argumentOrStdin(json))
            emit(Hex.encode(try command.encoded(requestID: requestId)))
        }
    }

    struct CXRDecode: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "cxr-decode", abstract: "Hex of one CXR packet → JSON (type, request_id, channel, sub_command, payload).")
        @Argument(help: "The packet's bytes in hex; standard input when absent or '-'.")
        var hex: String?

        func run() throws {
            let bytes = try Hex.decode(argumentOrStdin(hex))
            emit(try CXRPacket(decoding: bytes).json.jsonText)
        }
    }
}
