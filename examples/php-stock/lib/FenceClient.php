<?php
// A Fence client in plain PHP 8: curl and json_*, no protobuf, no Composer.
//
// Every call is a POST of a JSON object to /fence.v1.<Service>/<Method> with
// Content-Type: application/json (not an array in CURLOPT_POSTFIELDS: curl
// would send a form). A refusal is a FenceException carrying the reason
// (BUSY, STALE_TOKEN, NOT_HOLDER, LEASE_EXPIRED, ...), read from the
// Fence-Reason header or the body's "reason" field, and the facts.

declare(strict_types=1);

namespace Shop\Fence;

final class FenceException extends \RuntimeException
{
    /**
     * @param string   $reason     BUSY, STALE_TOKEN, NOT_HOLDER, LEASE_EXPIRED, UNKNOWN_TOKEN,
     *                             INVALID_ARGUMENT, ... ("UNAVAILABLE" and friends for transport trouble)
     * @param int      $httpStatus 429 for BUSY, 400 for the fencing refusals, 0 when no answer came
     * @param array    $facts      the refusal's facts as the server sent them (holder, lastToken, ...)
     * @param int|null $retryAfter BUSY: seconds until the holder's lease ends (Retry-After)
     * @param int|null $lastToken  the last accepted token, when it is a fact of the refusal
     */
    public function __construct(
        public readonly string $reason,
        string $message,
        public readonly int $httpStatus = 0,
        public readonly array $facts = [],
        public readonly ?int $retryAfter = null,
        public readonly ?int $lastToken = null,
    ) {
        parent::__construct($message);
    }
}

/**
 * A granted lease. The token is an int: compare it with <, >, ===. The signed
 * token is its text form with the grant's proof, "<token>.<cluster id>.<key
 * id>.<signature>" (null when the server sent none: a server before signed
 * tokens, or a grant made before the cluster had a key); KeySet::verify
 * (FenceProof.php) checks it.
 */
final class Lease
{
    public function __construct(
        public readonly string $name,
        public readonly string $owner,
        public readonly int $token,
        public readonly float $ttl,       // seconds
        public readonly float $remaining, // seconds, at the server when it answered
        public readonly ?string $signedToken = null,
    ) {
    }
}

final class FenceClient
{
    public function __construct(
        private readonly string $baseUrl = 'http://127.0.0.1:7420',
        private readonly float $timeout = 10.0, // seconds, on top of any wait
    ) {
    }

    /**
     * Takes the lock $name for $ttl seconds. With $wait > 0 the request queues
     * (first come, first served) up to $wait seconds; without, it is a try.
     * Throws FenceException with reason BUSY (and retryAfter) when not granted.
     */
    public function acquire(string $name, string $owner, float $ttl, float $wait = 0, ?string $requestId = null): Lease
    {
        $body = ['name' => $name, 'owner' => $owner, 'ttl' => $ttl]; // seconds, a JSON number
        if ($wait > 0) {
            $body['wait'] = $wait;
        }
        if ($requestId !== null) {
            $body['request_id'] = $requestId; // a retry with the same id gets the same lease, never a second
        }
        $reply = $this->call('LockService', 'Acquire', $body, $wait);
        return self::lease($reply['lease'] ?? null);
    }

    /** Gives the lock back. A lease that already ended is refused (STALE_TOKEN, LEASE_EXPIRED, NOT_HOLDER). */
    public function release(string $name, int $token): void
    {
        $this->call('LockService', 'Release', ['name' => $name, 'token' => $token]);
    }

    /**
     * The lock as the server sees it now: ['lease' => ?Lease, 'lastToken' => int]
     * (lastToken: the last token granted for it, 0 if never).
     */
    public function getLock(string $name): array
    {
        $lock = $this->call('LockService', 'Get', ['name' => $name])['lock'] ?? [];
        return [
            'lease' => isset($lock['lease']) ? self::lease($lock['lease']) : null,
            'lastToken' => isset($lock['lastToken']) ? self::int($lock['lastToken'], 'lastToken') : 0,
        ];
    }

    /** One JSON call. $wait: how long the server may hold the request (a queued acquire). */
    public function call(string $service, string $method, array $body, float $wait = 0): array
    {
        $budgetMs = (int) ceil(($wait + $this->timeout) * 1000);
        $headers = [];
        $ch = curl_init(rtrim($this->baseUrl, '/') . "/fence.v1.$service/$method");
        curl_setopt_array($ch, [
            CURLOPT_POST => true,
            CURLOPT_POSTFIELDS => json_encode($body, JSON_THROW_ON_ERROR | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION),
            CURLOPT_HTTPHEADER => [
                'Content-Type: application/json',
                'Accept: application/json',
                // The server answers before this deadline (BUSY when a wait is cut short).
                'Connect-Timeout-Ms: ' . $budgetMs,
            ],
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_CONNECTTIMEOUT_MS => 5000,
            CURLOPT_TIMEOUT_MS => $budgetMs + 2000,
            CURLOPT_HEADERFUNCTION => static function ($ch, string $line) use (&$headers): int {
                $parts = explode(':', $line, 2);
                if (count($parts) === 2) {
                    $headers[strtolower(trim($parts[0]))] = trim($parts[1]);
                }
                return strlen($line);
            },
        ]);
        $raw = curl_exec($ch);
        $status = (int) curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
        $curlError = curl_error($ch);
        curl_close($ch);
        if ($raw === false) {
            throw new FenceException('UNAVAILABLE', "fence $service/$method: $curlError");
        }
        $json = json_decode($raw, true);
        if ($status === 200 && is_array($json)) {
            return $json;
        }
        throw self::refusal($status, $headers, is_array($json) ? $json : [], (string) $raw);
    }

    /** The reason and facts of a refused call, without protobuf. */
    private static function refusal(int $status, array $headers, array $body, string $raw): FenceException
    {
        // The reason: the Fence-Reason header (the body's "reason" says the same).
        $reason = $headers['fence-reason'] ?? $body['reason'] ?? null;
        $facts = $body['facts'] ?? [];
        if ($reason === null) {
            // Not a Fence refusal (a proxy's 502, a timeout...): the code, or the HTTP status.
            $reason = isset($body['code']) ? strtoupper((string) $body['code']) : "HTTP_$status";
        }
        $lastToken = match (true) {
            isset($headers['fence-last-token']) => self::headerInt($headers['fence-last-token'], 'Fence-Last-Token'),
            isset($facts['lastToken']) => self::int($facts['lastToken'], 'lastToken'),
            default => null,
        };
        $retryAfter = isset($headers['retry-after']) ? self::headerInt($headers['retry-after'], 'Retry-After') : null;
        $message = $body['message'] ?? trim(substr($raw, 0, 200));
        return new FenceException((string) $reason, (string) $message, $status,
            is_array($facts) ? $facts : [], $retryAfter, $lastToken);
    }

    private static function lease(mixed $l): Lease
    {
        if (!is_array($l)) {
            throw new \UnexpectedValueException('fence: reply without a lease');
        }
        return new Lease(
            (string) $l['name'],
            (string) ($l['owner'] ?? ''),
            self::int($l['token'] ?? null, 'token'),
            self::seconds($l['ttl'] ?? 0),
            self::seconds($l['remaining'] ?? 0),
            isset($l['signedToken']) && $l['signedToken'] !== '' ? (string) $l['signedToken'] : null,
        );
    }

    /**
     * A 64-bit integer of the API (token, lastToken, version): a JSON number,
     * so json_decode gives a PHP int, compared as a number (99 < 100).
     * Anything else — a float, a quoted "100" — is refused, not guessed at.
     */
    public static function int(mixed $v, string $field): int
    {
        if (is_int($v) && $v >= 0) {
            return $v;
        }
        throw new \UnexpectedValueException("fence: $field is not an unsigned integer: " . var_export($v, true));
    }

    /** A header's decimal integer (Fence-Last-Token, Retry-After) as an int. */
    private static function headerInt(string $v, string $name): int
    {
        if (preg_match('/^\d{1,18}$/', $v)) {
            return (int) $v;
        }
        throw new \UnexpectedValueException("fence: header $name is not an unsigned integer: '$v'");
    }

    /** A duration of a reply in seconds: proto3's "2.5s" (or a JSON number). */
    public static function seconds(mixed $v): float
    {
        if (is_int($v) || is_float($v)) {
            return (float) $v;
        }
        if (is_string($v) && preg_match('/^(\d+(?:\.\d+)?)s$/', $v, $m)) {
            return (float) $m[1];
        }
        throw new \UnexpectedValueException('fence: not a duration: ' . var_export($v, true));
    }
}
