# link_graph.cmake — writes the parts' link graph as the build has it, one line per
# library or program of tensorscope: "<part>: <the parts it links directly>", each named
# without its tensorscope_ / tensorscope:: prefix (the CLI is "cli", the daemon program
# "tensorscoped"). docs/architecture.md draws the same graph, and
# tests/docs/test_doc_examples.py checks that the two agree.

function(tensorscope_write_link_graph path)
  set(text "")
  foreach(part IN ITEMS base tensor shared client_core client plotting recording view device_reader daemon
                        tensorscoped compare cli python)
    set(target tensorscope_${part})
    if(part STREQUAL "tensorscoped")
      set(target tensorscoped)
    endif()
    if(NOT TARGET ${target})
      continue()
    endif()
    get_target_property(links ${target} LINK_LIBRARIES)
    set(named "")
    foreach(link IN LISTS links)
      if(link MATCHES "^tensorscope(::|_)([a-z_]+)$")
        list(APPEND named ${CMAKE_MATCH_2})
      endif()
    endforeach()
    list(REMOVE_DUPLICATES named)
    list(SORT named)
    list(JOIN named " " joined)
    string(APPEND text "${part}: ${joined}\n")
  endforeach()
  file(WRITE ${path} "${text}")
endfunction()
