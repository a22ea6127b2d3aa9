//! Redis classifier: the type is the command, case-insensitively, with
//! the commands whose cost grows with an argument typed apart by it in four
//! sizes (up to 100, 1,000, 10,000, more): SCAN by its COUNT (10 by
//! default), MGET by its number of keys, LRANGE, ZRANGE and ZREVRANGE by
//! their span (stop - start + 1 when both indexes have one sign; a span
//! that depends on the length, such as 0 -1, and ZRANGE BYSCORE or BYLEX,
//! are the largest size). KEYS has a type of its own. Requests are RESP
//! multibulk requests or inline commands (words separated by spaces). An
//! argument is read only when it lies whole within the captured prefix: a
//! request cut before the arguments that size it is given its command's
//! largest size. The C example (../c/resp.c) and psp's native classifier
//! (app/redis.Classify) type requests the same way.
//!
//! Build (`make classifiers` from the repository root, or from this directory):
//! /usr/bin/rustc --edition 2021 --target wasm32-unknown-unknown -O --crate-type rlib --crate-name psp -o /tmp/libpsp.rlib ../../../sdk/rust/lib.rs
//! /usr/bin/rustc --edition 2021 --target wasm32-unknown-unknown -O --crate-type cdylib -C strip=symbols -C link-arg=-zstack-size=65536 --extern psp=/tmp/libpsp.rlib -o resp.wasm resp.rs
#![no_std]

use psp::psp_classifier;

/// The commands with a type, sorted: type 1 + index. They and the names
/// below are app/redis's types, kept by TestRESPTablesFollowNative.
// BEGIN GENERATED: commands
static COMMANDS: [&[u8]; NCMDS] = [
    b"APPEND", b"AUTH", b"BITCOUNT", b"BITPOS", b"BLMOVE", b"BLMPOP", b"BLPOP", b"BRPOP",
    b"BRPOPLPUSH", b"BZMPOP", b"BZPOPMAX", b"BZPOPMIN", b"CLIENT", b"COMMAND", b"CONFIG",
    b"COPY", b"DBSIZE", b"DECR", b"DECRBY", b"DEL", b"DISCARD", b"ECHO", b"EXEC", b"EXISTS",
    b"EXPIRE", b"EXPIREAT", b"EXPIRETIME", b"FLUSHALL", b"FLUSHDB", b"FUNCTION", b"GET",
    b"GETBIT", b"GETDEL", b"GETEX", b"GETRANGE", b"GETSET", b"HDEL", b"HELLO", b"HEXISTS",
    b"HGET", b"HGETALL", b"HINCRBY", b"HINCRBYFLOAT", b"HKEYS", b"HLEN", b"HMGET", b"HMSET",
    b"HRANDFIELD", b"HSCAN", b"HSET", b"HSETNX", b"HSTRLEN", b"HVALS", b"INCR", b"INCRBY",
    b"INCRBYFLOAT", b"INFO", b"KEYS", b"LCS", b"LINDEX", b"LINSERT", b"LLEN", b"LMOVE",
    b"LMPOP", b"LPOP", b"LPOS", b"LPUSH", b"LPUSHX", b"LRANGE", b"LREM", b"LSET", b"LTRIM",
    b"MEMORY", b"MGET", b"MSET", b"MSETNX", b"MULTI", b"OBJECT", b"PERSIST", b"PEXPIRE",
    b"PEXPIREAT", b"PEXPIRETIME", b"PING", b"PSETEX", b"PSUBSCRIBE", b"PTTL", b"PUBLISH",
    b"PUBSUB", b"PUNSUBSCRIBE", b"QUIT", b"RANDOMKEY", b"RENAME", b"RENAMENX", b"RESET",
    b"RPOP", b"RPOPLPUSH", b"RPUSH", b"RPUSHX", b"SADD", b"SCAN", b"SCARD", b"SDIFF",
    b"SDIFFSTORE", b"SELECT", b"SET", b"SETBIT", b"SETEX", b"SETNX", b"SETRANGE", b"SINTER",
    b"SINTERCARD", b"SINTERSTORE", b"SISMEMBER", b"SMEMBERS", b"SMISMEMBER", b"SMOVE", b"SPOP",
    b"SRANDMEMBER", b"SREM", b"SSCAN", b"STRLEN", b"SUBSCRIBE", b"SUBSTR", b"SUNION",
    b"SUNIONSTORE", b"TIME", b"TOUCH", b"TTL", b"TYPE", b"UNLINK", b"UNSUBSCRIBE", b"UNWATCH",
    b"WATCH", b"XADD", b"XDEL", b"XLEN", b"XRANGE", b"XREAD", b"XREVRANGE", b"XSETID", b"XTRIM",
    b"ZADD", b"ZCARD", b"ZCOUNT", b"ZDIFF", b"ZDIFFSTORE", b"ZINCRBY", b"ZINTER", b"ZINTERCARD",
    b"ZINTERSTORE", b"ZLEXCOUNT", b"ZMPOP", b"ZMSCORE", b"ZPOPMAX", b"ZPOPMIN", b"ZRANDMEMBER",
    b"ZRANGE", b"ZRANGEBYLEX", b"ZRANGEBYSCORE", b"ZRANGESTORE", b"ZRANK", b"ZREM",
    b"ZREMRANGEBYLEX", b"ZREMRANGEBYRANK", b"ZREMRANGEBYSCORE", b"ZREVRANGE", b"ZREVRANGEBYLEX",
    b"ZREVRANGEBYSCORE", b"ZREVRANK", b"ZSCAN", b"ZSCORE", b"ZUNION", b"ZUNIONSTORE",
];

const NCMDS: usize = 173;
// END GENERATED: commands
const MAX_NAME: usize = 16;

/// The sized commands, in the order of their larger sizes' types, which
/// follow the commands': _1K, _10K, _BIG each.
static SIZED: [&[u8]; 5] = [b"MGET", b"SCAN", b"LRANGE", b"ZRANGE", b"ZREVRANGE"];

const SIZE_BASE: u32 = 0;
const SIZE_1K: u32 = 1;
const SIZE_10K: u32 = 2;
const SIZE_BIG: u32 = 3;

const NUM_TYPES: i32 = 1 + NCMDS as i32 + 5 * 3;

/// Reads a request's arguments in order.
struct Args<'a> {
    p: &'a [u8],
    truncated: bool,
    inline: bool,
    argc: i64, // -1: unknown
    pos: usize,
    next: i64,
    bad: bool,
    last: &'a [u8],
}

fn count_tokens(p: &[u8]) -> i64 {
    let mut n = 0;
    let mut i = 0;
    while i < p.len() {
        while i < p.len() && p[i] == b' ' {
            i += 1;
        }
        if i == p.len() {
            break;
        }
        n += 1;
        while i < p.len() && p[i] != b' ' {
            i += 1;
        }
    }
    n
}

/// Reads 1 to 9 digits at p[i] up to "\r\n": the number and the index
/// after the line.
fn length_line(p: &[u8], i: usize) -> Option<(i64, usize)> {
    let mut j = i;
    let mut v: i64 = 0;
    while j < p.len() && p[j].is_ascii_digit() && j - i < 9 {
        v = v * 10 + (p[j] - b'0') as i64;
        j += 1;
    }
    if j == i || j + 1 >= p.len() || p[j] != b'\r' || p[j + 1] != b'\n' {
        return None;
    }
    Some((v, j + 2))
}

impl<'a> Args<'a> {
    fn new(p: &'a [u8], wirelen: u32) -> Option<Args<'a>> {
        let mut a = Args { p, truncated: wirelen as usize > p.len(), inline: false, argc: 0, pos: 0, next: 0, bad: false, last: &[] };
        if p.is_empty() {
            return None;
        }
        if p[0] != b'*' {
            a.inline = true;
            a.argc = -1;
            if let Some(i) = p.iter().position(|&c| c == b'\r' || c == b'\n') {
                a.p = &p[..i];
                a.truncated = false;
                a.argc = count_tokens(a.p);
                return Some(a);
            }
            if !a.truncated {
                a.argc = count_tokens(p);
            }
            return Some(a);
        }
        let (n, end) = length_line(p, 1)?;
        if n < 1 {
            return None;
        }
        a.argc = n;
        a.pos = end;
        Some(a)
    }

    /// Argument i (at or after the last one read), None when it does not
    /// exist or cannot be read within the prefix.
    fn arg(&mut self, i: i64) -> Option<&'a [u8]> {
        while self.next <= i && !self.bad {
            if self.argc >= 0 && self.next >= self.argc {
                return None;
            }
            let p = self.p;
            if self.inline {
                while self.pos < p.len() && p[self.pos] == b' ' {
                    self.pos += 1;
                }
                let start = self.pos;
                while self.pos < p.len() && p[self.pos] != b' ' {
                    self.pos += 1;
                }
                if self.pos == start || (self.pos == p.len() && self.truncated) {
                    self.bad = true;
                    break;
                }
                self.last = &p[start..self.pos];
            } else {
                if self.pos >= p.len() || p[self.pos] != b'$' {
                    self.bad = true;
                    break;
                }
                match length_line(p, self.pos + 1) {
                    Some((n, end)) if end + n as usize + 2 <= p.len() && p[end + n as usize] == b'\r' && p[end + n as usize + 1] == b'\n' => {
                        self.last = &p[end..end + n as usize];
                        self.pos = end + n as usize + 2;
                    }
                    _ => {
                        self.bad = true;
                        break;
                    }
                }
            }
            self.next += 1;
        }
        if self.bad || self.next != i + 1 {
            return None;
        }
        Some(self.last)
    }

    /// Argument i exists but could not be read.
    fn cut(&self, i: i64) -> bool {
        if self.argc >= 0 && i >= self.argc {
            return false;
        }
        self.bad
    }
}

fn fold_equal(p: &[u8], s: &[u8]) -> bool {
    p.len() == s.len() && p.iter().zip(s).all(|(&c, &u)| c.to_ascii_uppercase() == u)
}

/// An optional '-' and 1 to 18 digits.
fn parse_int(p: &[u8]) -> Option<i64> {
    let (neg, d) = match p.first() {
        Some(b'-') => (true, &p[1..]),
        _ => (false, p),
    };
    if d.is_empty() || d.len() > 18 {
        return None;
    }
    let mut v: i64 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as i64;
    }
    Some(if neg { -v } else { v })
}

fn bucket(n: i64) -> u32 {
    if n <= 100 {
        SIZE_BASE
    } else if n <= 1000 {
        SIZE_1K
    } else if n <= 10000 {
        SIZE_10K
    } else {
        SIZE_BIG
    }
}

/// SCAN's options, read pairwise as redis-server reads them.
fn scan_size(a: &mut Args) -> u32 {
    let mut count: i64 = 10;
    let mut i = 2;
    loop {
        let opt = match a.arg(i) {
            Some(o) => o,
            None => return if a.cut(i) { SIZE_BIG } else { bucket(count) },
        };
        let val = match a.arg(i + 1) {
            Some(v) => v,
            None => return if a.cut(i + 1) { SIZE_BIG } else { SIZE_BASE },
        };
        if fold_equal(opt, b"COUNT") {
            match parse_int(val) {
                Some(v) if v >= 1 => count = v,
                _ => return SIZE_BASE,
            }
        } else if !fold_equal(opt, b"MATCH") && !fold_equal(opt, b"TYPE") {
            return SIZE_BASE;
        }
        i += 2;
    }
}

/// LRANGE, ZRANGE and ZREVRANGE by their span.
fn range_size(a: &mut Args, zset: bool) -> u32 {
    let start = a.arg(2);
    let stop = if start.is_some() { a.arg(3) } else { None };
    let (start, stop) = match (start, stop) {
        (Some(s), Some(e)) => (s, e),
        _ => return if a.cut(2) || a.cut(3) { SIZE_BIG } else { SIZE_BASE },
    };
    if zset {
        let mut i = 4;
        loop {
            match a.arg(i) {
                Some(o) => {
                    if fold_equal(o, b"BYSCORE") || fold_equal(o, b"BYLEX") {
                        return SIZE_BIG;
                    }
                }
                None => {
                    if a.cut(i) {
                        return SIZE_BIG;
                    }
                    break;
                }
            }
            i += 1;
        }
    }
    match (parse_int(start), parse_int(stop)) {
        (Some(s), Some(e)) => {
            if (s < 0) != (e < 0) {
                SIZE_BIG
            } else {
                bucket(e - s + 1)
            }
        }
        _ => SIZE_BASE,
    }
}

fn find(name: &[u8]) -> Option<usize> {
    COMMANDS.binary_search(&name).ok()
}

fn sized(which: usize, size: u32) -> u32 {
    if size == SIZE_BASE {
        return 1 + find(SIZED[which]).unwrap_or(0) as u32;
    }
    1 + NCMDS as u32 + which as u32 * 3 + size - 1
}

fn classify(p: &[u8], wirelen: u32) -> u32 {
    let mut a = match Args::new(p, wirelen) {
        Some(a) => a,
        None => return 0,
    };
    let name = match a.arg(0) {
        Some(n) if !n.is_empty() && n.len() <= MAX_NAME => n,
        _ => return 0,
    };
    let mut upper = [0u8; MAX_NAME];
    for (u, &c) in upper.iter_mut().zip(name) {
        *u = c.to_ascii_uppercase();
    }
    let upper = &upper[..name.len()];
    let id = match find(upper) {
        Some(id) => id,
        None => return 0,
    };
    match upper {
        b"MGET" => sized(0, if a.argc < 0 { SIZE_BIG } else { bucket(a.argc - 1) }),
        b"SCAN" => sized(1, scan_size(&mut a)),
        b"LRANGE" => sized(2, range_size(&mut a, false)),
        b"ZRANGE" => sized(3, range_size(&mut a, true)),
        b"ZREVRANGE" => sized(4, range_size(&mut a, true)),
        _ => 1 + id as u32,
    }
}

psp_classifier!(
    classify,
    NUM_TYPES,
// BEGIN GENERATED: names
    "UNKNOWN\nAPPEND\nAUTH\nBITCOUNT\nBITPOS\nBLMOVE\nBLMPOP\nBLPOP\nBRPOP\nBRPOPLPUSH\n\
    BZMPOP\nBZPOPMAX\nBZPOPMIN\nCLIENT\nCOMMAND\nCONFIG\nCOPY\nDBSIZE\nDECR\nDECRBY\nDEL\n\
    DISCARD\nECHO\nEXEC\nEXISTS\nEXPIRE\nEXPIREAT\nEXPIRETIME\nFLUSHALL\nFLUSHDB\n\
    FUNCTION\nGET\nGETBIT\nGETDEL\nGETEX\nGETRANGE\nGETSET\nHDEL\nHELLO\nHEXISTS\nHGET\n\
    HGETALL\nHINCRBY\nHINCRBYFLOAT\nHKEYS\nHLEN\nHMGET\nHMSET\nHRANDFIELD\nHSCAN\nHSET\n\
    HSETNX\nHSTRLEN\nHVALS\nINCR\nINCRBY\nINCRBYFLOAT\nINFO\nKEYS\nLCS\nLINDEX\nLINSERT\n\
    LLEN\nLMOVE\nLMPOP\nLPOP\nLPOS\nLPUSH\nLPUSHX\nLRANGE\nLREM\nLSET\nLTRIM\nMEMORY\n\
    MGET\nMSET\nMSETNX\nMULTI\nOBJECT\nPERSIST\nPEXPIRE\nPEXPIREAT\nPEXPIRETIME\nPING\n\
    PSETEX\nPSUBSCRIBE\nPTTL\nPUBLISH\nPUBSUB\nPUNSUBSCRIBE\nQUIT\nRANDOMKEY\nRENAME\n\
    RENAMENX\nRESET\nRPOP\nRPOPLPUSH\nRPUSH\nRPUSHX\nSADD\nSCAN\nSCARD\nSDIFF\nSDIFFSTORE\n\
    SELECT\nSET\nSETBIT\nSETEX\nSETNX\nSETRANGE\nSINTER\nSINTERCARD\nSINTERSTORE\n\
    SISMEMBER\nSMEMBERS\nSMISMEMBER\nSMOVE\nSPOP\nSRANDMEMBER\nSREM\nSSCAN\nSTRLEN\n\
    SUBSCRIBE\nSUBSTR\nSUNION\nSUNIONSTORE\nTIME\nTOUCH\nTTL\nTYPE\nUNLINK\nUNSUBSCRIBE\n\
    UNWATCH\nWATCH\nXADD\nXDEL\nXLEN\nXRANGE\nXREAD\nXREVRANGE\nXSETID\nXTRIM\nZADD\n\
    ZCARD\nZCOUNT\nZDIFF\nZDIFFSTORE\nZINCRBY\nZINTER\nZINTERCARD\nZINTERSTORE\nZLEXCOUNT\n\
    ZMPOP\nZMSCORE\nZPOPMAX\nZPOPMIN\nZRANDMEMBER\nZRANGE\nZRANGEBYLEX\nZRANGEBYSCORE\n\
    ZRANGESTORE\nZRANK\nZREM\nZREMRANGEBYLEX\nZREMRANGEBYRANK\nZREMRANGEBYSCORE\n\
    ZREVRANGE\nZREVRANGEBYLEX\nZREVRANGEBYSCORE\nZREVRANK\nZSCAN\nZSCORE\nZUNION\n\
    ZUNIONSTORE\nMGET_1K\nMGET_10K\nMGET_BIG\nSCAN_1K\nSCAN_10K\nSCAN_BIG\nLRANGE_1K\n\
    LRANGE_10K\nLRANGE_BIG\nZRANGE_1K\nZRANGE_10K\nZRANGE_BIG\nZREVRANGE_1K\n\
    ZREVRANGE_10K\nZREVRANGE_BIG"
// END GENERATED: names
);
