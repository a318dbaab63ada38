<?php
// Verifying a Fence signed token in PHP with the built-in sodium extension:
// the same rules as Go's fence.ParseSignedToken and fence.KeySet.Verify, so
// that a token Fence never granted for this lock — a flipped byte, another
// lock's or another cluster's proof, a made-up 2^53-1 — is refused before
// the MySQL transaction, where it would otherwise be compared and, if
// large, poison the guard row.
//
// A signed token's text form is <token>.<cluster id>.<key id>.<signature>
// (decimal token, signature in unpadded base64url); the key set is what
// `fence keys --json` or GET /v1/keys publishes. The proof is an Ed25519
// signature over (docs/design.md):
//
//   "fence-grant-v1" 0x00
//   uint32 big-endian length, bytes of the key id
//   uint32 big-endian length, bytes of the cluster id
//   uint32 big-endian length, bytes of the lock name
//   uint64 big-endian token

declare(strict_types=1);

namespace Shop\Fence;

/** A token without a valid proof for this lock: Fence's FORGED_TOKEN. */
final class ForgedTokenException extends \RuntimeException
{
    /**
     * @param string $kind one of the KIND_* constants of KeySet
     */
    public function __construct(
        public readonly string $kind,
        public readonly int $token,
        public readonly string $lock,
        string $why,
    ) {
        parent::__construct("token $token is not a grant of lock '$lock': $why");
    }
}

/** A value that is not a signed token's text form (Go: INVALID_ARGUMENT, field token). */
final class MalformedTokenException extends \InvalidArgumentException
{
}

/** A parsed signed token. $signature is null for a bare token (no proof). */
final class SignedToken
{
    public function __construct(
        public readonly int $token,
        public readonly string $clusterId = '',
        public readonly string $keyId = '',
        public readonly ?string $signature = null, // 64 raw bytes
    ) {
    }

    public const MAX_BYTES = 256;
    public const MAX_TOKEN = 9007199254740991; // 2^53-1
    public const MAX_CLUSTER_ID_BYTES = 64;

    /** Unpadded base64url. */
    public static function base64url(string $bytes): string
    {
        return rtrim(strtr(base64_encode($bytes), '+/', '-_'), '=');
    }

    /** The text form (or a bare decimal token), as Go's ParseSignedToken reads it. */
    public static function parse(string $s): self
    {
        if (strlen($s) > self::MAX_BYTES) {
            throw new MalformedTokenException('token: at most ' . self::MAX_BYTES . ' bytes, got ' . strlen($s));
        }
        $parts = explode('.', $s);
        // Digits only (ASCII), no sign, no leading zero; compared as a string
        // first so that a long number cannot overflow the int.
        $num = $parts[0];
        if (!preg_match('/^[1-9][0-9]{0,15}$/D', $num) || (int) $num > self::MAX_TOKEN) {
            throw new MalformedTokenException("token: a decimal number in [1, " . self::MAX_TOKEN . "], got '$num'");
        }
        if (count($parts) === 1) {
            return new self((int) $num);
        }
        if (count($parts) !== 4) {
            throw new MalformedTokenException("token: <token>.<cluster id>.<key id>.<signature>, got '$s'");
        }
        // The cluster id: 1 to 64 of A-Z a-z 0-9 - _; the key id: 12 of them.
        // No whitespace, padding or other byte anywhere (Go's ParseSignedToken).
        if (!preg_match('/^[A-Za-z0-9_-]{1,' . self::MAX_CLUSTER_ID_BYTES . '}$/D', $parts[1])) {
            throw new MalformedTokenException("token: a cluster id of 1 to " . self::MAX_CLUSTER_ID_BYTES . " ASCII letters, digits, '-' and '_', got '{$parts[1]}'");
        }
        if (!preg_match('/^[A-Za-z0-9_-]{12}$/D', $parts[2])) {
            throw new MalformedTokenException("token: a key id of 12 base64url characters, got '{$parts[2]}'");
        }
        // 64 bytes are 86 characters of unpadded base64url; the pattern keeps
        // out what a lenient decoder would skip or translate, and encoding
        // the bytes again must give the same text (the unused low bits of
        // the last character are zero: one token, one text).
        $sig = preg_match('/^[A-Za-z0-9_-]{86}$/D', $parts[3]) ? base64_decode(strtr($parts[3], '-_', '+/') . '==', true) : false;
        if ($sig === false || strlen($sig) !== SODIUM_CRYPTO_SIGN_BYTES || self::base64url($sig) !== $parts[3]) {
            throw new MalformedTokenException("token: a signature of 64 bytes in canonical unpadded base64url, got '{$parts[3]}'");
        }
        return new self((int) $num, $parts[1], $parts[2], $sig);
    }
}

/**
 * A cluster's public signing keys and the cluster ids whose proofs it
 * accepts (its own and restored_from), read from `fence keys --json`.
 */
final class KeySet
{
    public const KIND_NO_PROOF = 'no proof';
    public const KIND_ANOTHER_CLUSTER = 'another cluster';
    public const KIND_UNKNOWN_KEY = 'unknown key';
    public const KIND_DOES_NOT_HOLD = 'does not hold';

    /**
     * @param string[]              $clusterIds the cluster id and those it was restored from
     * @param array<string, string> $keys       key id => 32-byte Ed25519 public key
     */
    private function __construct(private readonly array $clusterIds, private readonly array $keys)
    {
    }

    public static function fromFile(string $path): self
    {
        $json = @file_get_contents($path);
        if ($json === false) {
            throw new \RuntimeException("key set: cannot read $path");
        }
        return self::fromJson($json);
    }

    /** The JSON of `fence keys --json` / GET /v1/keys (a JWKS with cluster_id and restored_from). */
    public static function fromJson(string $json): self
    {
        $doc = json_decode($json, true, 16, JSON_THROW_ON_ERROR);
        if (!is_array($doc) || !is_string($doc['cluster_id'] ?? null) || $doc['cluster_id'] === '' || !is_array($doc['keys'] ?? null)) {
            throw new \UnexpectedValueException('key set: want {"cluster_id": "...", "keys": [...]}');
        }
        if ($doc['keys'] === []) {
            throw new \UnexpectedValueException('key set keys: want at least one key (an empty set verifies nothing)');
        }
        $clusters = [$doc['cluster_id']];
        foreach ($doc['restored_from'] ?? [] as $id) {
            $clusters[] = (string) $id;
        }
        $keys = [];
        foreach ($doc['keys'] as $i => $k) {
            if (($k['kty'] ?? null) !== 'OKP' || ($k['crv'] ?? null) !== 'Ed25519' || !is_string($k['x'] ?? null)
                || ($k['alg'] ?? 'EdDSA') !== 'EdDSA' || ($k['use'] ?? 'sig') !== 'sig') {
                throw new \UnexpectedValueException("key set keys[$i]: want an Ed25519 signature key (kty OKP, crv Ed25519, alg EdDSA, use sig)");
            }
            $x = preg_match('/^[A-Za-z0-9_-]{43}$/D', $k['x']) ? base64_decode(strtr($k['x'], '-_', '+/') . '=', true) : false;
            if ($x === false || strlen($x) !== SODIUM_CRYPTO_SIGN_PUBLICKEYBYTES || SignedToken::base64url($x) !== $k['x']) {
                throw new \UnexpectedValueException("key set keys[$i].x: want 32 bytes in unpadded base64url");
            }
            // A key id is derived (the first 9 bytes of the key's SHA-256), not chosen.
            $kid = rtrim(strtr(base64_encode(substr(hash('sha256', $x, true), 0, 9)), '+/', '-_'), '=');
            if (($k['kid'] ?? null) !== $kid) {
                throw new \UnexpectedValueException("key set keys[$i].kid: want the key's id '$kid'");
            }
            if (isset($keys[$kid])) {
                throw new \UnexpectedValueException("key set keys[$i].kid: '$kid' named twice");
            }
            $keys[$kid] = $x;
        }
        return new self($clusters, $keys);
    }

    /** The bytes a proof signs (Go's fence.ProofMessage). */
    public static function proofMessage(string $keyId, string $clusterId, string $lock, int $token): string
    {
        $m = "fence-grant-v1\0";
        foreach ([$keyId, $clusterId, $lock] as $field) {
            $m .= pack('N', strlen($field)) . $field; // strlen counts bytes (UTF-8), not characters
        }
        return $m . pack('J', $token); // unsigned 64-bit big-endian
    }

    /**
     * Checks that $signedToken (the text form, or a SignedToken) is a grant
     * of $lock by this set's cluster (or one it was restored from), signed
     * with one of its keys; returns the parsed token. Throws
     * MalformedTokenException for a value that is not a signed token and
     * ForgedTokenException (->kind) for one that is not this lock's grant.
     */
    public function verify(string|SignedToken $signedToken, string $lock): SignedToken
    {
        $st = is_string($signedToken) ? SignedToken::parse($signedToken) : $signedToken;
        $forged = static fn (string $kind, string $why) => new ForgedTokenException($kind, $st->token, $lock, $why);
        if ($st->signature === null) {
            throw $forged(self::KIND_NO_PROOF, 'no proof');
        }
        if (!in_array($st->clusterId, $this->clusterIds, true)) {
            throw $forged(self::KIND_ANOTHER_CLUSTER, "proof of another cluster ('{$st->clusterId}')");
        }
        $key = $this->keys[$st->keyId] ?? null;
        if ($key === null) {
            throw $forged(self::KIND_UNKNOWN_KEY, "unknown signing key '{$st->keyId}'");
        }
        $message = self::proofMessage($st->keyId, $st->clusterId, $lock, $st->token);
        if (!sodium_crypto_sign_verify_detached($st->signature, $message, $key)) {
            throw $forged(self::KIND_DOES_NOT_HOLD, 'proof does not hold for this lock and token');
        }
        return $st;
    }
}
