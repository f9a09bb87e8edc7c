// image_encoding_test.cc — PNG and JPEG bytes of image_encoding.h, decoded back by OpenCV's
// own codecs (another implementation): PNG exact, JPEG close, errors as Status.
#include "tensorscope/plotting/image_encoding.h"

#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace tensorscope::plotting {
namespace {

cv::Mat gradient(int rows, int cols, int type) {
  cv::Mat frame(rows, cols, type);
  for (int r = 0; r < rows; ++r) {
    auto* row = frame.ptr<unsigned char>(r);
    for (int c = 0; c < cols * frame.channels(); ++c) row[c] = static_cast<unsigned char>((r * 7 + c * 3) % 256);
  }
  return frame;
}

cv::Mat decode(const std::string& bytes, int flags) {
  return cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data())), flags);
}

double mean_abs_difference(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat diff;
  cv::absdiff(a, b, diff);
  const cv::Scalar means = cv::mean(diff);
  return (means[0] + means[1] + means[2] + means[3]) / a.channels();
}

TEST(ImageEncodingTest, PngIsLosslessForGreyBgrAndBgra) {
  for (const int type : {CV_8UC1, CV_8UC3, CV_8UC4}) {
    const cv::Mat frame = gradient(45, 67, type);
    const StatusOr<std::string> png = encode_png(frame);
    ASSERT_TRUE(png.is_ok()) << png.message();
    EXPECT_EQ(png->substr(1, 3), "PNG");
    const cv::Mat back = decode(*png, cv::IMREAD_UNCHANGED);
    ASSERT_EQ(back.type(), type);
    ASSERT_EQ(back.size(), frame.size());
    EXPECT_EQ(cv::norm(back, frame, cv::NORM_INF), 0.0) << "channels " << frame.channels();
  }
}

TEST(ImageEncodingTest, PngOfAViewWithARowStride) {
  const cv::Mat whole = gradient(40, 100, CV_8UC3);
  const cv::Mat view = whole(cv::Rect(13, 5, 31, 20));  // rows 300 bytes apart, 93 used
  ASSERT_FALSE(view.isContinuous());
  const StatusOr<std::string> png = encode_png(view);
  ASSERT_TRUE(png.is_ok()) << png.message();
  EXPECT_EQ(cv::norm(decode(*png, cv::IMREAD_COLOR), view, cv::NORM_INF), 0.0);
}

TEST(ImageEncodingTest, JpegIsCloseAndSmallerAtLowerQuality) {
  cv::Mat frame(240, 320, CV_8UC3, cv::Scalar(250, 250, 250));
  cv::rectangle(frame, cv::Rect(40, 40, 120, 80), cv::Scalar(200, 60, 20), cv::FILLED);  // a bar: blue-ish in BGR
  cv::line(frame, cv::Point(0, 200), cv::Point(319, 150), cv::Scalar(0, 0, 255), 2);
  const StatusOr<std::string> good = encode_jpeg(frame, 95);
  const StatusOr<std::string> poor = encode_jpeg(frame, 20);
  ASSERT_TRUE(good.is_ok()) << good.message();
  ASSERT_TRUE(poor.is_ok()) << poor.message();
  EXPECT_EQ(static_cast<unsigned char>((*good)[0]), 0xFF);
  EXPECT_EQ(static_cast<unsigned char>((*good)[1]), 0xD8);  // SOI
  EXPECT_LT(poor->size(), good->size());
  const cv::Mat back = decode(*good, cv::IMREAD_COLOR);
  ASSERT_EQ(back.size(), frame.size());
  EXPECT_LT(mean_abs_difference(back, frame), 2.0);
  // The channels keep their order: the bar's centre is still blue-ish, not red-ish.
  const cv::Vec3b centre = back.at<cv::Vec3b>(80, 100);
  EXPECT_NEAR(centre[0], 200, 8);
  EXPECT_NEAR(centre[2], 20, 8);
}

TEST(ImageEncodingTest, JpegOfGreyAndOfBgraDropsNothingButAlpha) {
  const cv::Mat grey = gradient(64, 64, CV_8UC1);
  const StatusOr<std::string> g = encode_jpeg(grey, 90);
  ASSERT_TRUE(g.is_ok()) << g.message();
  const cv::Mat grey_back = decode(*g, cv::IMREAD_UNCHANGED);
  ASSERT_EQ(grey_back.type(), CV_8UC1);
  EXPECT_LT(mean_abs_difference(grey_back, grey), 4.0);

  cv::Mat bgra(32, 48, CV_8UC4, cv::Scalar(10, 120, 230, 7));
  const StatusOr<std::string> c = encode_jpeg(bgra, 90);
  ASSERT_TRUE(c.is_ok()) << c.message();
  const cv::Mat colour_back = decode(*c, cv::IMREAD_COLOR);
  cv::Mat bgr;
  cv::cvtColor(bgra, bgr, cv::COLOR_BGRA2BGR);
  EXPECT_LT(mean_abs_difference(colour_back, bgr), 3.0);
}

TEST(ImageEncodingTest, WhatCannotBeEncodedIsAnError) {
  EXPECT_FALSE(encode_png(cv::Mat()).is_ok());
  EXPECT_FALSE(encode_jpeg(cv::Mat(), 90).is_ok());
  const StatusOr<std::string> floats = encode_png(cv::Mat(4, 4, CV_32FC1, cv::Scalar(0.5)));
  ASSERT_FALSE(floats.is_ok());
  EXPECT_NE(floats.message().find("8-bit"), std::string::npos) << floats.message();
  const StatusOr<std::string> two = encode_jpeg(cv::Mat(4, 4, CV_8UC2), 90);
  ASSERT_FALSE(two.is_ok());
  EXPECT_NE(two.message().find("2 channels"), std::string::npos) << two.message();
  const StatusOr<std::string> wide = encode_jpeg(cv::Mat(1, 70000, CV_8UC1, cv::Scalar(3)), 90);
  ASSERT_FALSE(wide.is_ok());
  EXPECT_NE(wide.message().find("larger than JPEG allows"), std::string::npos) << wide.message();
  // Quality outside 1..100 is clamped, not an error.
  EXPECT_TRUE(encode_jpeg(gradient(8, 8, CV_8UC3), 0).is_ok());
  EXPECT_TRUE(encode_jpeg(gradient(8, 8, CV_8UC3), 1000).is_ok());
}

}  // namespace
}  // namespace tensorscope::plotting
