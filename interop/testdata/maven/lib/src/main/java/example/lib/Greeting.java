package example.lib;

public final class Greeting {
    private Greeting() {}

    public static String of(String name) {
        return "hello, " + name;
    }
}
