#include "engram/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

namespace engram {
namespace {

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = Status::Corruption("block 3 checksum mismatch");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.ToString(), "Corruption: block 3 checksum mismatch");
  EXPECT_EQ(s.WithContext("t.engram").message(), "t.engram: block 3 checksum mismatch");
}

TEST(Status, FromErrnoMapsNotFound) {
  Status s = Status::FromErrno("open x", ENOENT);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("open x"), std::string::npos);
}

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  ENGRAM_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(Result, PropagatesFailure) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_FALSE(Quarter(6).ok());
  EXPECT_EQ(Quarter(6).status().message(), "odd");
}

TEST(Result, OkStatusBecomesInternalError) {
  Result<int> r{Status::OK()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(Result, ValueOfAnErrorThrowsItsStatusNotAMessagelessVariantError) {
  Result<int> r = Status::NotFound("no table at /nvme/layer1.engram");
  try {
    (void)r.value();
    FAIL() << "value() of an error returned";
  } catch (const BadResultAccess& e) {
    EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("no table at /nvme/layer1.engram"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)*r, BadResultAccess);
  EXPECT_THROW((void)std::move(r).value(), BadResultAccess);
  Result<std::string> ok = std::string("x");
  EXPECT_EQ(ok->size(), 1u);
}

}  // namespace
}  // namespace engram
