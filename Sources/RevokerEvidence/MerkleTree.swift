import Crypto

/// A Merkle tree hash as RFC 6962 (section 2.1) defines it, over leaves given in order: a
/// leaf is hashed with a 0x00 prefix, an inner node with 0x01, and a tree of n > 1 leaves
/// splits at the largest power of two below n.
public enum MerkleTree {
    /// The root of an empty tree: the hash of nothing.
    public static let emptyRoot = Array(SHA256.hash(data: [UInt8]()))

    public static func leafHash(_ leaf: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(data: [0] + leaf))
    }

    static func nodeHash(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(data: [1] + left + right))
    }

    /// The root over `leaves`.
    public static func root(_ leaves: [[UInt8]]) -> [UInt8] {
        var builder = Builder()
        for leaf in leaves { builder.append(leaf) }
        return builder.root
    }

    /// The audit path (RFC 6962, 2.1.1) proving that leaf `index` is in the tree of `leaves`.
    public static func path(for index: Int, in leaves: [[UInt8]]) -> [[UInt8]] {
        path(index, leaves[...].map(leafHash)[...])
    }

    private static func path(_ index: Int, _ hashes: ArraySlice<[UInt8]>) -> [[UInt8]] {
        guard hashes.count > 1 else { return [] }
        let split = largestPowerOfTwo(below: hashes.count)
        let start = hashes.startIndex
        if index < split {
            return path(index, hashes[start..<start + split]) + [subtreeRoot(hashes[(start + split)...])]
        }
        return path(index - split, hashes[(start + split)...]) + [subtreeRoot(hashes[start..<start + split])]
    }

    private static func subtreeRoot(_ hashes: ArraySlice<[UInt8]>) -> [UInt8] {
        guard hashes.count > 1 else { return hashes.first ?? emptyRoot }
        let split = largestPowerOfTwo(below: hashes.count)
        let start = hashes.startIndex
        return nodeHash(subtreeRoot(hashes[start..<start + split]), subtreeRoot(hashes[(start + split)...]))
    }

    /// Whether `path` proves `leaf` at `index` in a tree of `size` leaves with `root`
    /// (RFC 9162, 2.1.3.2).
    public static func verify(leaf: [UInt8], index: Int, size: Int, path: [[UInt8]], root: [UInt8]) -> Bool {
        guard index >= 0, index < size else { return false }
        var fn = index
        var sn = size - 1
        var hash = leafHash(leaf)
        for sibling in path {
            guard sn != 0 else { return false }
            if fn & 1 == 1 || fn == sn {
                hash = nodeHash(sibling, hash)
                if fn & 1 == 0 {
                    while fn & 1 == 0, fn != 0 {
                        fn >>= 1
                        sn >>= 1
                    }
                }
            } else {
                hash = nodeHash(hash, sibling)
            }
            fn >>= 1
            sn >>= 1
        }
        return sn == 0 && hash == root
    }

    static func largestPowerOfTwo(below n: Int) -> Int {
        var k = 1
        while k << 1 < n { k <<= 1 }
        return k
    }

    /// Computes a root from leaves that arrive one at a time, keeping O(log n) hashes.
    public struct Builder: Sendable {
        // Perfect subtrees, largest first: (hash, leaf count).
        private var stack: [([UInt8], Int)] = []
        public private(set) var count = 0

        public init() {}

        public mutating func append(_ leaf: [UInt8]) {
            var node = (Self.leafHash(leaf), 1)
            while let last = stack.last, last.1 == node.1 {
                stack.removeLast()
                node = (MerkleTree.nodeHash(last.0, node.0), last.1 * 2)
            }
            stack.append(node)
            count += 1
        }

        /// The root of the leaves so far: the perfect subtrees folded right to left.
        public var root: [UInt8] {
            guard var hash = stack.last?.0 else { return MerkleTree.emptyRoot }
            for node in stack.dropLast().reversed() {
                hash = MerkleTree.nodeHash(node.0, hash)
            }
            return hash
        }

        private static func leafHash(_ leaf: [UInt8]) -> [UInt8] { MerkleTree.leafHash(leaf) }
    }
}
