# cmake -DINPUT=file -DOUTPUT=file.cpp -DSYMBOL=name -P embed_text.cmake
# Writes `extern const char* const SYMBOL;` defined as the file's bytes. Uses hex bytes rather than a raw string
# literal so that no content can end the literal early.
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUTPUT}" "// Generated from ${INPUT}; do not edit.\nnamespace rime {\nstatic const char ${SYMBOL}_bytes[] = {${bytes} 0x00};\nextern const char* const ${SYMBOL};\nconst char* const ${SYMBOL} = ${SYMBOL}_bytes;\n}\n")
