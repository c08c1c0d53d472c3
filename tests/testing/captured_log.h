// Routes spdlog's default logger into a string for the object's lifetime, so
// a test can check what the library logged.
#pragma once

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

namespace engram::testing {

class CapturedLog {
 public:
  CapturedLog()
      : previous_(spdlog::default_logger()),
        logger_(std::make_shared<spdlog::logger>("captured", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_))) {
    logger_->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger_);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::string text() {
    logger_->flush();
    return out_.str();
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace engram::testing
