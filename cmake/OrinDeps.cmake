# Finds the Debian libraries orin uses by header and library name, so that a
# prefix made with `dpkg -x` (scripts/fetch-deps.sh, for machines without the
# -dev packages) works through CMAKE_PREFIX_PATH as well as /usr does.
#
# orin_find_dep(<target> HEADER <h> [PATH_SUFFIXES ...] LIBS <names...> [LIB_SUFFIXES ...])
# defines an IMPORTED target orin::<target>.
function(orin_find_dep target)
  cmake_parse_arguments(D "" "HEADER" "PATH_SUFFIXES;LIBS;LIB_SUFFIXES" ${ARGN})
  find_path(${target}_INCLUDE_DIR ${D_HEADER} PATH_SUFFIXES ${D_PATH_SUFFIXES})
  find_library(${target}_LIBRARY NAMES ${D_LIBS} PATH_SUFFIXES ${D_LIB_SUFFIXES})
  if(NOT ${target}_INCLUDE_DIR OR NOT ${target}_LIBRARY)
    message(FATAL_ERROR "orin: ${target} not found (header ${D_HEADER}, library ${D_LIBS}). "
                        "Install it: see scripts/install-deps.sh")
  endif()
  add_library(orin::${target} UNKNOWN IMPORTED GLOBAL)
  set_target_properties(orin::${target} PROPERTIES
    IMPORTED_LOCATION ${${target}_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${${target}_INCLUDE_DIR})
  message(STATUS "orin: ${target}: ${${target}_LIBRARY}")
endfunction()

orin_find_dep(inih     HEADER ini.h                   LIBS inih)
orin_find_dep(cjson    HEADER cjson/cJSON.h           LIBS cjson)
orin_find_dep(pcre2    HEADER pcre2.h                 LIBS pcre2-8)
orin_find_dep(utf8proc HEADER utf8proc.h              LIBS utf8proc)
orin_find_dep(openblas HEADER cblas.h
              PATH_SUFFIXES x86_64-linux-gnu/openblas-pthread aarch64-linux-gnu/openblas-pthread openblas
              LIBS openblas
              # Debian links libopenblas.so through update-alternatives, which a
              # `dpkg -x` prefix lacks: look in the flavour's own folder too.
              LIB_SUFFIXES openblas-pthread)

# Images (core/src/vision). jpeglib.h includes jconfig.h, which Debian keeps
# in the multiarch include folder: that folder joins the target's includes.
orin_find_dep(jpeg     HEADER jpeglib.h               LIBS jpeg)
find_path(jpeg_CONFIG_DIR jconfig.h
          PATH_SUFFIXES x86_64-linux-gnu aarch64-linux-gnu ${CMAKE_LIBRARY_ARCHITECTURE})
if(NOT jpeg_CONFIG_DIR)
  message(FATAL_ERROR "orin: jpeg: jconfig.h not found. Install it: see scripts/install-deps.sh")
endif()
set_property(TARGET orin::jpeg APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${jpeg_CONFIG_DIR})
orin_find_dep(png      HEADER png.h                   LIBS png16 png)
# PNG image data inflated whole (core/src/vision/image_png_inflate.c).
orin_find_dep(deflate  HEADER libdeflate.h            LIBS deflate)

find_package(Threads REQUIRED)
