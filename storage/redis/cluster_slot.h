// The hash slot of a key, as Redis Cluster computes it: CRC16 (XMODEM:
// polynomial 0x1021, initial value 0) of the key, modulo 16384; when the key
// holds a hash tag -- the bytes between its first '{' and the first '}' after
// it, if that is not empty -- of the tag alone.
//
// Keys that share a tag share a slot, so one node: the remote table keys
// (remote_table_keys.h) give each block its own tag, its number, so that a
// table's blocks spread over every master.
//
// Pure.
#pragma once

#include <cstdint>
#include <string_view>

namespace engram::redis {

inline constexpr uint32_t kSlotCount = 16384;

uint16_t Crc16(std::string_view bytes);
// The part of `key` that is hashed: its hash tag, or the whole key.
std::string_view HashedPart(std::string_view key);
uint16_t KeySlot(std::string_view key);

}  // namespace engram::redis
