# cmake -DIN=file.xz -DOUT=file -P unxz.cmake: decompresses with xz into OUT
# (through a temporary name, so that an interrupted build leaves no half file).
find_program(XZ xz REQUIRED)
get_filename_component(out_dir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${out_dir})
execute_process(COMMAND ${XZ} -dc ${IN} OUTPUT_FILE ${OUT}.tmp RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}.tmp)
  message(FATAL_ERROR "xz -dc ${IN} failed: ${rc}")
endif()
file(RENAME ${OUT}.tmp ${OUT})
