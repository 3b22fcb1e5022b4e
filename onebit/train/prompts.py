"""The prompts a draft head is trained on: ordinary chat requests of many kinds, written here.

A head learns what its base answers, so the prompts only have to look like what users ask:
advice, explanations, code, lists, emails, dialogue, summaries, translation, rewriting and
questions of fact. They are made by crossing request forms with subjects, then shuffled with a
fixed seed, so the set is the same on every machine and large enough that no subject repeats
often. None of them is a prompt of benchmarks/ (the benchmark measures text the head never saw).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from collections.abc import Sequence as Seq

_WORD = re.compile(r" [a-z]{5,12}")

ADVICE = [
    "Give me some tips for {}.", "How can I get better at {}?", "What should I know before {}?",
    "I am struggling with {}. Any advice?", "What are common mistakes people make when {}?",
]
ADVICE_SUBJECTS = [
    "saving money each month", "running my first 10k race", "keeping houseplants alive",
    "studying for a math exam", "public speaking", "cooking for a large family",
    "starting a vegetable garden", "working from home", "learning to play the guitar",
    "travelling on a small budget", "writing a cover letter", "training a new puppy",
    "organizing a small kitchen", "reading more books", "negotiating a salary",
    "making friends in a new city", "taking better photos with a phone", "drinking more water",
    "preparing for a job interview", "moving to a new apartment", "learning to swim as an adult",
    "keeping a journal", "planning a birthday party", "reducing screen time",
]
EXPLAIN = [
    "Explain {} in simple terms.", "How does {} work?", "Can you describe {} to a beginner?",
    "What is {}, and why does it matter?", "Give a short explanation of {}.",
]
EXPLAIN_SUBJECTS = [
    "photosynthesis", "a rainbow", "inflation", "the water cycle", "how vaccines work",
    "a black hole", "the stock market", "compound interest", "how airplanes fly",
    "the greenhouse effect", "how a bicycle stays upright", "DNA", "electric cars",
    "the immune system", "plate tectonics", "a solar eclipse", "how the internet works",
    "gravity", "supply and demand", "how bread rises", "the moon's phases", "volcanoes",
    "recycling", "a computer's memory", "ocean tides", "how batteries store energy",
    "why leaves change colour in autumn", "earthquakes", "how a microwave oven heats food",
]
CODE = [
    "Write a Python function that {}.", "Write a short JavaScript function that {}.",
    "Write a Python function that {}, and show an example call.",
]
CODE_SUBJECTS = [
    "reverses a string", "counts the vowels in a sentence", "finds the largest number in a list",
    "removes duplicates from a list", "reads a text file line by line",
    "checks whether a word is a palindrome", "computes the factorial of a number",
    "sorts a list of names alphabetically", "converts Celsius to Fahrenheit",
    "returns the Fibonacci numbers up to n", "merges two dictionaries",
    "counts how often each word appears", "checks whether a year is a leap year",
    "flattens a nested list", "validates an email address", "sums the digits of a number",
    "finds the average of a list of numbers", "capitalizes every word in a string",
]
LISTS = [
    "List {} {}.", "Name {} {}.", "What are {} {}?", "Give me a list of {} {}.",
]
LIST_SUBJECTS = [
    "healthy breakfast ideas", "fun things to do on a rainy day", "famous scientists",
    "ways to reduce stress", "good habits for students", "animals that live in the desert",
    "board games for families", "vegetables that grow quickly", "ways to save energy at home",
    "questions to ask in an interview", "classic novels worth reading", "hobbies to try",
    "tips for a long car trip", "easy dinner recipes", "benefits of regular exercise",
    "reasons to learn a second language", "things to see in Paris", "uses for baking soda",
]
WRITE = [
    "Write a short email {}.", "Write a polite message {}.", "Draft a brief note {}.",
]
WRITE_SUBJECTS = [
    "thanking a colleague for their help", "asking a landlord to fix a leaking tap",
    "inviting friends to a picnic on Saturday", "apologizing for missing a meeting",
    "asking a teacher for an extension on an essay", "congratulating a friend on a new job",
    "requesting a refund for a broken toaster", "telling my team about a schedule change",
    "welcoming a new neighbour", "confirming a dentist appointment",
]
DIALOGUE = [
    "Write a short dialogue between {} and {} about {}.",
]
PEOPLE = ["a teacher", "a student", "a doctor", "a chef", "a customer", "a shop owner",
          "two friends", "a grandmother", "a child", "a robot"]
TOPICS = ["the weather", "a lost umbrella", "homework", "a new recipe", "a trip to the zoo",
          "a broken phone", "the first day of school", "a birthday present", "a football match"]
SUMMARY = [
    "Summarize the story of {} in a few sentences.", "Tell me briefly what happens in {}.",
    "Give a one-paragraph summary of {}.",
]
STORIES = [
    "Cinderella", "Little Red Riding Hood", "the Odyssey", "Hamlet", "The Tortoise and the Hare",
    "Snow White", "Jack and the Beanstalk", "The Three Little Pigs", "Robinson Crusoe",
    "Alice in Wonderland", "Pinocchio", "The Wizard of Oz", "Treasure Island", "Peter Pan",
]
TRANSLATE = [
    "Translate into French: {}", "Translate into Spanish: {}", "Translate into German: {}",
    "How do you say this in Italian? {}",
]
SENTENCES = [
    "Where is the train station?", "I would like a cup of coffee, please.",
    "The weather is beautiful today.", "My brother lives in a small town near the sea.",
    "Can you help me find my keys?", "We are going to the market tomorrow morning.",
    "This book is very interesting.", "What time does the museum open?",
    "I have been learning to cook for two years.", "Thank you for the lovely dinner.",
]
REWRITE = [
    "Rewrite this sentence to sound more formal: {}", "Make this sentence simpler: {}",
    "Correct the grammar in this sentence: {}",
]
ROUGH = [
    "me and him goes to the shop yesterday", "the meeting it was very long and boring",
    "i has finished the report but it need checking", "can u send me the files asap",
    "this product are the best one we ever made", "she dont like waking up early",
]
FACTS = [
    "Why is the ocean salty?", "Why do cats purr?", "How far away is the Sun?",
    "Why do we have seasons?", "What makes thunder?", "Why do onions make us cry?",
    "How do bees make honey?", "What causes hiccups?", "Why do stars twinkle?",
    "How many bones are in the human body?", "Why do birds migrate?",
    "What is the tallest mountain in the world?", "How do fish breathe underwater?",
    "Why do we dream?", "What is the difference between a virus and a bacterium?",
]
COUNTS = ["three", "four", "five", "six", "seven"]
HOW_TO = [
    "How do I {}?", "What are the steps to {}?", "Walk me through how to {}.",
    "What is the easiest way to {}?",
]
TASKS = [
    "change a flat tyre on a bicycle", "make a budget spreadsheet", "brew good coffee at home",
    "clean a cast iron pan", "write a haiku", "set up a fish tank", "tie a tie",
    "back up the photos on my computer", "plant a tree", "make pancakes from scratch",
    "prepare for a long hike", "remove a coffee stain from a shirt", "learn to touch type",
    "start running in the morning", "write a good thank-you note", "fold a paper airplane",
]
COMPARE = [
    "What is the difference between {} and {}?", "Compare {} and {} in a few sentences.",
    "Which is better for a beginner, {} or {}?",
]
PAIRS = [
    ("a cat", "a dog"), ("tea", "coffee"), ("renting", "buying a home"), ("a lake", "a sea"),
    ("Python", "JavaScript"), ("a virus", "a bacterium"), ("butter", "margarine"),
    ("a novel", "a short story"), ("a laptop", "a tablet"), ("walking", "cycling"),
    ("a frog", "a toad"), ("weather", "seasons"), ("a debit card", "a credit card"),
]
CREATIVE = [
    "Write a short story about {}.", "Write a four-line poem about {}.",
    "Describe {} as if you were a tour guide.", "Write a children's story about {}.",
    "Tell me a joke about {}.",
]
THINGS = [
    "a lighthouse", "a lost kitten", "the first snow of winter", "a busy market",
    "a robot learning to cook", "an old oak tree", "a rainy Monday", "a dragon who is afraid",
    "a library at night", "a trip to the moon", "a summer festival", "a friendly ghost",
]
PROS_CONS = [
    "What are the pros and cons of {}?", "Should I consider {}? Give me both sides.",
]
CHOICES = [
    "working from home", "electric scooters", "homeschooling", "a four-day work week",
    "living in a big city", "buying a used car", "learning online", "keeping chickens",
]
MEANING = ["What does the word '{}' mean?", "Use the word '{}' in three sentences."]
WORDS = ["ephemeral", "resilient", "meticulous", "serendipity", "ambiguous", "nostalgia",
         "pragmatic", "curious", "frugal", "eloquent"]
PLAN = ["Plan a relaxing day in {}.", "Suggest an itinerary for three days in {}.",
        "What should a visitor eat in {}?"]
PLACES = ["Rome", "Tokyo", "a small mountain village", "London", "the countryside",
          "Barcelona", "New York", "a seaside town"]


def _categories() -> list[list[str]]:
    """Every category's prompts, each list in a fixed order."""
    dialogue = [DIALOGUE[0].format(a, PEOPLE[(i * 3 + 1) % len(PEOPLE)], t)
                for i, (a, t) in enumerate((a, t) for a in PEOPLE for t in TOPICS)
                if a != PEOPLE[(i * 3 + 1) % len(PEOPLE)]]
    return [
        [f.format(s) for f in ADVICE for s in ADVICE_SUBJECTS],
        [f.format(s) for f in EXPLAIN for s in EXPLAIN_SUBJECTS],
        [f.format(s) for f in CODE for s in CODE_SUBJECTS],
        [f.format(n, s) for f in LISTS for s in LIST_SUBJECTS
         for n in COUNTS[(len(s) % 3):][:2]],
        [f.format(s) for f in WRITE for s in WRITE_SUBJECTS],
        dialogue,
        [f.format(s) for f in SUMMARY for s in STORIES],
        [f.format(s) for f in TRANSLATE for s in SENTENCES],
        [f.format(s) for f in REWRITE for s in ROUGH],
        list(FACTS),
        [f.format(s) for f in HOW_TO for s in TASKS],
        [f.format(a, b) for f in COMPARE for a, b in PAIRS],
        [f.format(s) for f in CREATIVE for s in THINGS],
        [f.format(s) for f in PROS_CONS for s in CHOICES],
        [f.format(s) for f in MEANING for s in WORDS],
        [f.format(s) for f in PLAN for s in PLACES],
    ]


def chat_prompts(seed: int = 0) -> list[str]:
    """Every training prompt, in an order fixed by `seed`: each category shuffled, then taken
    in turn, one from each, so any first n prompts cover every kind of request alike."""
    rng = random.Random(seed)
    queues = []
    for category in _categories():
        items = sorted(set(category))
        rng.shuffle(items)
        queues.append(items)
    out: list[str] = []
    seen: set[str] = set()
    while any(queues):
        for q in queues:
            if q:
                item = q.pop()
                if item not in seen:
                    seen.add(item)
                    out.append(item)
    return out


#: Held out: prompts written apart from the forms and subjects above, so the acceptance
#: measured on them says how the head does on requests unlike those it was trained on.
#: request forms around one word of the base's own vocabulary (`word_prompts`)
WORD_FORMS = [
    "Write a short paragraph about {}.", "Tell me something interesting about {}.",
    "Give me three facts about {}.", "Write a short story in which {} matters.",
    "Explain {} to a ten-year-old.", "Write a short email that mentions {}.",
    "What should a beginner know about {}?", "Describe {} in a few sentences.",
    "How does {} come up in everyday life?", "Write a short poem about {}.",
    "What are the pros and cons of {}?", "Give me some practical tips related to {}.",
    "Why does {} matter?", "Write a short dialogue between two friends about {}.",
    "What do people usually get wrong about {}?", "List five questions someone might ask about {}.",
]


def vocabulary_words(decode: Callable[[list[int]], str], vocab_size: int) -> list[str]:
    """The whole lowercase words of 5 to 12 letters that the tokenizer spells as one token
    after a space, taken from ids 1000 .. 20000 (past the bytes and the shortest merges, before
    the rarest), in id order: subjects for `word_prompts`. `decode(ids) -> str` is the base's
    tokenizer's. A few are pieces of longer words; the base answers those too."""
    words = []
    for i in range(min(1000, vocab_size), min(20000, vocab_size)):
        text = decode([i])
        if _WORD.fullmatch(text):
            words.append(text[1:])
    return words


def word_prompts(words: list[str], n: int, seed: int = 0) -> list[str]:
    """`n` prompts, each a `WORD_FORMS` form around a word of `words` (shuffled with `seed`):
    every word once before any word twice, and a word asked again in a later round gets
    another form (round r shifts the forms by 5 r; 5 and 16 are coprime, so 16 rounds give
    each word every form once). The crossed prompts above repeat their few hundred subjects
    across forms; these bring a new subject each: measured, answers on more subjects carry
    further to prompts unlike the training ones than more answers on the same ones
    (docs/heads.md)."""
    most = len(words) * len(WORD_FORMS)
    if n > most:
        raise ValueError(f"{n} word prompts asked for; {len(words)} words in "
                         f"{len(WORD_FORMS)} forms give {most}")
    picked = list(words)
    random.Random(seed).shuffle(picked)
    out = []
    for i in range(n):
        rnd, at = divmod(i, len(picked))
        out.append(WORD_FORMS[(at + 5 * rnd) % len(WORD_FORMS)].format(picked[at]))
    return out


def interleave(*lists: Seq[str]) -> list[str]:
    """The lists merged so that every prefix holds each in proportion to its length (item i of
    a list of n sits at (i + 0.5) / n; ties: the earlier list first): a training run cut short
    by its time budget still has every kind of prompt."""
    keyed = [((i + 0.5) / len(items), k, i, p) for k, items in enumerate(lists)
             for i, p in enumerate(items)]
    return [p for *_, p in sorted(keyed)]


HELD_OUT = [
    "My sourdough starter smells like nail polish. Is that normal?",
    "Can you help me name my new bakery?",
    "Explain what a mortgage is to a teenager.",
    "Write a Python class for a simple bank account with deposit and withdraw methods.",
    "What should I consider when choosing a first telescope?",
    "Describe the life cycle of a butterfly.",
    "Draft a toast for my sister's wedding.",
    "What are some good stretches after sitting all day?",
    "Why do some people get seasick and others do not?",
    "Give me a weekly meal plan for a vegetarian.",
    "How does a bill become a law?",
    "Write a limerick about a forgetful wizard.",
    "What is the Pythagorean theorem, with an example?",
    "I have an interview for a barista job tomorrow. What might they ask?",
    "Explain how noise-cancelling headphones work.",
    "Summarize the main causes of the French Revolution.",
    "Write a SQL query that finds the ten most recent orders.",
    "How can I make my small balcony feel cosy?",
    "What's a polite way to decline a party invitation?",
    "Translate into Portuguese: The children are playing in the garden.",
    "Why is it important to sleep before an exam?",
    "Describe a typical day for a medieval blacksmith.",
    "How do solar panels turn light into electricity?",
    "Write a product description for a reusable water bottle.",
    "What are the rules of chess for the knight and the bishop?",
    "Give me ideas for a science fair project about plants.",
    "Explain recursion with a simple example in Python.",
    "What is the best way to learn to draw faces?",
    "How do I politely ask my neighbour to turn down their music?",
    "Tell me about the history of the bicycle.",
    "What happens to the body during a fever?",
    "Write a short motivational message for someone starting a new job.",
]
