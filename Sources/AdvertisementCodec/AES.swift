// AES-128 (FIPS-197) and AES-CCM (NIST SP 800-38C, RFC 3610), the block cipher and mode that
// encrypted BTHome v2 and Xiaomi MiBeacon v4/v5 advertisements use. Only the forward cipher:
// CCM encrypts and decrypts with it. Written from the standards; no dependency.
//
// Side channels: the S-box is a table lookup, so the cipher's timing may depend on the key and
// data through the cache; the tag comparison is constant-time (``AESCCM/open``). An attacker
// would need to time a bridge's decodes of their own advertisements over a radio, which is
// outside what this bridge defends against (docs/advertisements.md).

/// AES with a 128-bit key: the expanded key and the forward cipher of one block.
public struct AES128: Sendable {
    /// The 44 words of the expanded key, 4 per round (FIPS-197 §5.2), big-endian columns.
    private let roundKeys: [UInt32]

    /// `key` must be 16 bytes.
    public init(key: [UInt8]) throws(AdvertisementError) {
        guard key.count == 16 else { throw .malformed("an AES-128 key is 16 bytes, this one has \(key.count)") }
        var words = [UInt32](repeating: 0, count: 44)
        for i in 0..<4 {
            words[i] = UInt32(key[4 * i]) << 24 | UInt32(key[4 * i + 1]) << 16 | UInt32(key[4 * i + 2]) << 8 | UInt32(key[4 * i + 3])
        }
        var rcon: UInt8 = 1
        for i in 4..<44 {
            var t = words[i - 1]
            if i % 4 == 0 {
                t = (t << 8) | (t >> 24)  // RotWord
                t = Self.subWord(t) ^ (UInt32(rcon) << 24)
                rcon = Self.xtime(rcon)
            }
            words[i] = words[i - 4] ^ t
        }
        roundKeys = words
    }

    /// The cipher of one block: four big-endian columns (bytes 0-3 are column 0, row 0 first).
    /// SubBytes, ShiftRows and MixColumns of a round as four table lookups per column (the
    /// tables are the S-box times the MixColumns matrix, FIPS-197 §5.1).
    func encrypt(_ block: Block) -> Block {
        Self.tables.withUnsafeBufferPointer { te in
            roundKeys.withUnsafeBufferPointer { rk in
                Self.sbox.withUnsafeBufferPointer { box in
                    @inline(__always) func t(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32) -> UInt32 {
                        te[Int(a >> 24)] ^ te[256 + Int((b >> 16) & 0xFF)] ^ te[512 + Int((c >> 8) & 0xFF)] ^ te[768 + Int(d & 0xFF)]
                    }
                    @inline(__always) func last(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32) -> UInt32 {
                        UInt32(box[Int(a >> 24)]) << 24 | UInt32(box[Int((b >> 16) & 0xFF)]) << 16
                            | UInt32(box[Int((c >> 8) & 0xFF)]) << 8 | UInt32(box[Int(d & 0xFF)])
                    }
                    var s0 = block.w0 ^ rk[0], s1 = block.w1 ^ rk[1], s2 = block.w2 ^ rk[2], s3 = block.w3 ^ rk[3]
                    for round in 1..<10 {
                        let k = 4 * round
                        let t0 = t(s0, s1, s2, s3) ^ rk[k]
                        let t1 = t(s1, s2, s3, s0) ^ rk[k + 1]
                        let t2 = t(s2, s3, s0, s1) ^ rk[k + 2]
                        let t3 = t(s3, s0, s1, s2) ^ rk[k + 3]
                        s0 = t0; s1 = t1; s2 = t2; s3 = t3
                    }
                    return Block(
                        w0: last(s0, s1, s2, s3) ^ rk[40], w1: last(s1, s2, s3, s0) ^ rk[41],
                        w2: last(s2, s3, s0, s1) ^ rk[42], w3: last(s3, s0, s1, s2) ^ rk[43])
                }
            }
        }
    }

    /// The cipher of a 16-byte block given as bytes.
    public func encrypt(_ block: [UInt8]) -> [UInt8] {
        precondition(block.count == 16, "an AES block is 16 bytes")
        var b = Block()
        for i in 0..<16 { b[i] = block[i] }
        let out = encrypt(b)
        return (0..<16).map { out[$0] }
    }

    @inline(__always) static func xtime(_ b: UInt8) -> UInt8 { (b << 1) ^ ((b & 0x80) != 0 ? 0x1B : 0) }

    private static func subWord(_ w: UInt32) -> UInt32 {
        UInt32(sbox[Int(w >> 24)]) << 24 | UInt32(sbox[Int((w >> 16) & 0xFF)]) << 16
            | UInt32(sbox[Int((w >> 8) & 0xFF)]) << 8 | UInt32(sbox[Int(w & 0xFF)])
    }

    /// Four tables of 256 words: entry x of the first is the column (2·S(x), S(x), S(x), 3·S(x)),
    /// the others the same rotated by one, two and three bytes.
    private static let tables: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 1024)
        for x in 0..<256 {
            let s = sbox[x]
            let w = UInt32(xtime(s)) << 24 | UInt32(s) << 16 | UInt32(s) << 8 | UInt32(xtime(s) ^ s)
            t[x] = w
            t[256 + x] = w >> 8 | w << 24
            t[512 + x] = w >> 16 | w << 16
            t[768 + x] = w >> 24 | w << 8
        }
        return t
    }()

    /// FIPS-197 Figure 7.
    static let sbox: [UInt8] = [
        0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76,
        0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0,
        0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15,
        0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75,
        0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84,
        0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf,
        0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8,
        0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2,
        0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73,
        0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb,
        0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79,
        0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08,
        0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a,
        0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e,
        0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf,
        0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16,
    ]
}

/// One 16-byte block as four big-endian words (no heap storage).
struct Block: Sendable {
    var w0: UInt32 = 0, w1: UInt32 = 0, w2: UInt32 = 0, w3: UInt32 = 0

    /// Byte `i` (0…15) in the order of the block's bytes.
    subscript(i: Int) -> UInt8 {
        get {
            let w = i < 8 ? (i < 4 ? w0 : w1) : (i < 12 ? w2 : w3)
            return UInt8(truncatingIfNeeded: w >> (24 - 8 * UInt32(i & 3)))
        }
        set {
            let shift = 24 - 8 * UInt32(i & 3)
            let mask = ~(UInt32(0xFF) << shift)
            let v = UInt32(newValue) << shift
            switch i >> 2 {
            case 0: w0 = w0 & mask | v
            case 1: w1 = w1 & mask | v
            case 2: w2 = w2 & mask | v
            default: w3 = w3 & mask | v
            }
        }
    }

    /// XORs `byte` into byte `i`.
    @inline(__always) mutating func xor(_ i: Int, _ byte: UInt8) {
        let v = UInt32(byte) << (24 - 8 * UInt32(i & 3))
        switch i >> 2 {
        case 0: w0 ^= v
        case 1: w1 ^= v
        case 2: w2 ^= v
        default: w3 ^= v
        }
    }
}

/// AES-CCM (counter with CBC-MAC, NIST SP 800-38C / RFC 3610) over ``AES128``.
public enum AESCCM {
    /// Encrypts `plaintext` and returns it with its `tagLength`-byte MIC (4 for BTHome and
    /// MiBeacon; 4, 6, 8… 16). The nonce is 7 to 13 bytes.
    public static func seal(
        _ plaintext: [UInt8], key: AES128, nonce: [UInt8], associatedData: [UInt8] = [], tagLength: Int = 4
    ) throws(AdvertisementError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        try check(nonce: nonce, tagLength: tagLength, length: plaintext.count)
        let mac = cbcMAC(plaintext, key: key, nonce: nonce, associatedData: associatedData, tagLength: tagLength)
        let (ciphertext, s0) = ctr(plaintext, key: key, nonce: nonce)
        var tag = [UInt8](repeating: 0, count: tagLength)
        for i in 0..<tagLength { tag[i] = mac[i] ^ s0[i] }
        return (ciphertext, tag)
    }

    /// Decrypts `ciphertext` and checks its `tag` (compared in constant time); a wrong key or an
    /// altered byte throws ``AdvertisementError/authenticationFailed``.
    public static func open(
        _ ciphertext: [UInt8], tag: [UInt8], key: AES128, nonce: [UInt8], associatedData: [UInt8] = []
    ) throws(AdvertisementError) -> [UInt8] {
        try check(nonce: nonce, tagLength: tag.count, length: ciphertext.count)
        let (plaintext, s0) = ctr(ciphertext, key: key, nonce: nonce)
        let mac = cbcMAC(plaintext, key: key, nonce: nonce, associatedData: associatedData, tagLength: tag.count)
        var difference: UInt8 = 0
        for i in 0..<tag.count { difference |= (mac[i] ^ s0[i]) ^ tag[i] }
        guard difference == 0 else { throw .authenticationFailed }
        return plaintext
    }

    private static func check(nonce: [UInt8], tagLength: Int, length: Int) throws(AdvertisementError) {
        guard (7...13).contains(nonce.count) else { throw .malformed("a CCM nonce is 7 to 13 bytes, this one has \(nonce.count)") }
        guard (4...16).contains(tagLength), tagLength % 2 == 0 else { throw .malformed("a CCM tag is 4, 6… 16 bytes, not \(tagLength)") }
        let lengthBytes = 15 - nonce.count
        guard lengthBytes >= 8 || length < 1 << (8 * lengthBytes) else {
            throw .malformed("\(length) bytes do not fit a CCM message with a \(nonce.count)-byte nonce")
        }
    }

    /// Block `A_i` or `B_0`: flags, nonce, then `value` big-endian in the remaining bytes.
    private static func block(flags: UInt8, nonce: [UInt8], value: Int) -> Block {
        var b = Block()
        b[0] = flags
        for i in 0..<nonce.count { b[1 + i] = nonce[i] }
        var v = value
        var i = 15
        while i > nonce.count {
            b[i] = UInt8(truncatingIfNeeded: v)
            v >>= 8
            i -= 1
        }
        return b
    }

    /// XORs `bytes[from..<from+16]` (zero padded) into `x`.
    @inline(__always) private static func absorb(_ x: inout Block, _ bytes: [UInt8], from: Int) {
        let n = min(16, bytes.count - from)
        for i in 0..<n { x.xor(i, bytes[from + i]) }
    }

    /// The CBC-MAC `T` (SP 800-38C §6.1), unencrypted: its first `tagLength` bytes are the tag.
    private static func cbcMAC(
        _ message: [UInt8], key: AES128, nonce: [UInt8], associatedData: [UInt8], tagLength: Int
    ) -> Block {
        let l = 15 - nonce.count
        let flags = UInt8((associatedData.isEmpty ? 0 : 0x40) | ((tagLength - 2) / 2) << 3 | (l - 1))
        var x = key.encrypt(block(flags: flags, nonce: nonce, value: message.count))
        if !associatedData.isEmpty {
            // The length of the associated data, then the data, padded to whole blocks.
            var header: [UInt8]
            let a = associatedData.count
            if a < 0xFF00 {
                header = [UInt8(a >> 8), UInt8(a & 0xFF)]
            } else {
                header = [0xFF, 0xFE, UInt8((a >> 24) & 0xFF), UInt8((a >> 16) & 0xFF), UInt8((a >> 8) & 0xFF), UInt8(a & 0xFF)]
            }
            header += associatedData
            var from = 0
            while from < header.count {
                absorb(&x, header, from: from)
                x = key.encrypt(x)
                from += 16
            }
        }
        var from = 0
        while from < message.count {
            absorb(&x, message, from: from)
            x = key.encrypt(x)
            from += 16
        }
        return x
    }

    /// The counter-mode transform of `input` with `A_1, A_2…`, and `S_0 = E(A_0)` for the tag.
    private static func ctr(_ input: [UInt8], key: AES128, nonce: [UInt8]) -> (output: [UInt8], s0: Block) {
        let flags = UInt8(15 - nonce.count - 1)
        let s0 = key.encrypt(block(flags: flags, nonce: nonce, value: 0))
        var output = input
        var counter = 1
        var from = 0
        while from < input.count {
            let s = key.encrypt(block(flags: flags, nonce: nonce, value: counter))
            for i in 0..<min(16, input.count - from) { output[from + i] ^= s[i] }
            counter += 1
            from += 16
        }
        return (output, s0)
    }
}
